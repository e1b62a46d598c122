//go:build !mutations

package fencing

import "fmt"

// variant is empty in the default build: every hook below is the constant
// false, so the compiler folds each guarded branch away and the fences are
// exactly the contract. The broken variants live in variant_on.go, built
// only with -tags mutations.
type variant struct{}

// newVariant refuses a broken variant the build does not have: callers
// check names with CheckVariant first, so reaching here is a bug.
func newVariant(m Variant) variant {
	if m != VariantNone {
		panic(fmt.Sprintf("server: variant %q: %v", m, ErrNoVariants))
	}
	return variant{}
}

// Variants lists the broken variants this build has: none.
func Variants() []Variant { return nil }

// CheckVariant accepts only VariantNone in the default build.
func CheckVariant(m Variant) error {
	if m != VariantNone {
		return fmt.Errorf("server variant %q: %w", m, ErrNoVariants)
	}
	return nil
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
