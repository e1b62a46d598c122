package agent

import "github.com/rendermac/rendermac/internal/variantset"

// Variant names a deliberately broken agent behaviour. The harness runs a
// broken agent to prove that the fleet run's checks fail on it; only a
// -tags mutations build has any (variant_on.go), and the default build
// refuses every name but VariantNone.
type Variant string

// VariantNone is the agent as specified.
const VariantNone Variant = ""

// ErrNoVariants is returned for a broken variant in a build without them.
var ErrNoVariants = variantset.ErrNone

// Variants lists the agent's broken variants this build has (none without
// -tags mutations: variant_on.go, variant_off.go).
func Variants() []Variant { return variants.All() }

// CheckVariant reports whether m is VariantNone or one of Variants.
func CheckVariant(m Variant) error { return variants.Check(m) }

// conflicted reports whether the commit_after_conflict variant was told
// the attempt is gone.
func (a *Agent) conflicted(at *attempt) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return at.conflicted
}
