//go:build !mutations

package fencing

import "github.com/rendermac/rendermac/internal/variantset"

// variant is empty in the default build: every hook below is the constant
// false, so the compiler folds each guarded branch away and the fences are
// exactly the contract. The broken variants live in variant_on.go, built
// only with -tags mutations.
type variant struct{}

// variants is empty: the default build has no broken variant.
var variants = variantset.New[Variant]("server")

func newVariant(m Variant) variant {
	variants.Must(m)
	return variant{}
}

func (variant) noEpochCheck() bool               { return false }
func (variant) noTokenCheck() bool               { return false }
func (variant) commitFromCancelling() bool       { return false }
func (variant) cancelQueuedNoop() bool           { return false }
func (variant) commitTx1IgnoresCancelling() bool { return false }
func (variant) progressIgnoresDevice() bool      { return false }
func (variant) commitIgnoresAttemptStatus() bool { return false }
func (variant) ignoreRetryBudget() bool          { return false }
func (variant) requeueAnyFailure() bool          { return false }
func (variant) ignoreAdmissionDeadline() bool    { return false }
func (variant) commitNotIdempotent() bool        { return false }
func (variant) noOutputSeal() bool               { return false }
