//go:build !mutations

package agent

import "github.com/rendermac/rendermac/internal/variantset"

// variant is empty in the default build: every hook is the constant false,
// so each guarded branch folds away and the agent is exactly the contract.
type variant struct{}

// variants is empty: the default build has no broken agent.
var variants = variantset.New[Variant]("agent")

func newVariant(m Variant) variant {
	variants.Must(m)
	return variant{}
}

func (variant) commitAfterConflict() bool  { return false }
func (variant) noReadDeadline() bool       { return false }
func (variant) diskFullNotRetryable() bool { return false }
func (variant) reuseCommitToken() bool     { return false }
