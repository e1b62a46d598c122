package agent

import "errors"

// Variant names a deliberately broken agent behaviour. The harness runs a
// broken agent to prove that the fleet run's checks fail on it; only a
// -tags mutations build has any (variant_on.go), and the default build
// refuses every name but VariantNone.
type Variant string

// VariantNone is the agent as specified.
const VariantNone Variant = ""

// ErrNoVariants is returned for a broken variant in a build without them.
var ErrNoVariants = errors.New("this build has no broken agent variants (build with -tags mutations)")

// conflicted reports whether the commit_after_conflict variant was told
// the attempt is gone.
func (a *Agent) conflicted(at *attempt) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return at.conflicted
}
