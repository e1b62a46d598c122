//go:build !mutations

package agent

import "fmt"

// variant is empty in the default build: every hook is the constant false,
// so each guarded branch folds away and the agent is exactly the contract.
type variant struct{}

func newVariant(Variant) variant { return variant{} }

// Variants lists the broken variants this build has: none.
func Variants() []Variant { return nil }

// CheckVariant accepts only VariantNone in the default build.
func CheckVariant(m Variant) error {
	if m != VariantNone {
		return fmt.Errorf("agent variant %q: %w", m, ErrNoVariants)
	}
	return nil
}

func (variant) commitAfterConflict() bool  { return false }
func (variant) noReadDeadline() bool       { return false }
func (variant) diskFullNotRetryable() bool { return false }
func (variant) reuseCommitToken() bool     { return false }
