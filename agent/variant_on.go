//go:build mutations

package agent

import "github.com/rendermac/rendermac/internal/variantset"

// The broken variants, only in a build with -tags mutations. Each removes
// one of the agent's own fences and must fail the fleet run.
const (
	// VariantCommitAfterConflict keeps rendering after a lease_conflict that
	// says the attempt is gone, and commits it.
	VariantCommitAfterConflict Variant = "commit_after_conflict"
	// VariantNoReadDeadline never pings the gateway: a half-open connection
	// goes unnoticed.
	VariantNoReadDeadline Variant = "no_read_deadline"
	// VariantDiskFullNotRetryable reports a full work dir as runner_failed,
	// which is not retryable.
	VariantDiskFullNotRetryable Variant = "disk_full_not_retryable"
	// VariantReuseCommitToken keeps the first commit token it was given and
	// sends it for every later attempt.
	VariantReuseCommitToken Variant = "reuse_commit_token"
)

// variants are the agent's broken variants (Variants, CheckVariant).
var variants = variantset.New("agent", VariantCommitAfterConflict, VariantNoReadDeadline, VariantDiskFullNotRetryable,
	VariantReuseCommitToken)

// variant is the one broken variant an Agent runs.
type variant struct{ m Variant }

func newVariant(m Variant) variant { return variant{m: variants.Must(m)} }

func (v variant) commitAfterConflict() bool  { return v.m == VariantCommitAfterConflict }
func (v variant) noReadDeadline() bool       { return v.m == VariantNoReadDeadline }
func (v variant) diskFullNotRetryable() bool { return v.m == VariantDiskFullNotRetryable }
func (v variant) reuseCommitToken() bool     { return v.m == VariantReuseCommitToken }
