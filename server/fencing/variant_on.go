//go:build mutations

package fencing

import "github.com/rendermac/rendermac/internal/variantset"

// The mutations, only in a build with -tags mutations. Each exists to prove
// that the harness and the tests can fail: it removes a single fence and
// must be caught.
const (
	// VariantNoEpochCheck makes commit ignore the lease epoch.
	VariantNoEpochCheck Variant = "no_epoch_check"
	// VariantCommitFromCancelling makes commit transaction 2 skip its check
	// for a cancelling job; the transition tables then refuse cancelling ->
	// succeeded, or the job fails where it should have been cancelled.
	VariantCommitFromCancelling Variant = "commit_from_cancelling"
	// VariantNoTokenCheck makes commit and fail ignore the commit token.
	VariantNoTokenCheck Variant = "no_token_check"
	// VariantCancelQueuedNoop makes Cancel answer a queued job cancelled
	// without writing anything: the job stays queued and is leased.
	VariantCancelQueuedNoop Variant = "cancel_queued_noop"
	// VariantCommitTx1IgnoresCancelling makes commit transaction 1 skip its
	// check for a cancelling job: the output is claimed instead of the
	// cancellation being finalized.
	VariantCommitTx1IgnoresCancelling Variant = "commit_tx1_ignores_cancelling"
	// VariantProgressIgnoresDevice makes Progress compare job, attempt and
	// epoch but not the session's device: another device renews the lease.
	VariantProgressIgnoresDevice Variant = "progress_ignores_device"
	// VariantCommitIgnoresAttemptStatus makes commit transaction 1 skip the
	// uploading/committing check: a replayed commit of a terminal attempt
	// reaches the transition assertion, which reports ErrInternal.
	VariantCommitIgnoresAttemptStatus Variant = "commit_ignores_attempt_status"
	// VariantIgnoreRetryBudget makes a retryable failure requeue the job
	// without comparing attempt_number to max_attempts.
	VariantIgnoreRetryBudget Variant = "ignore_retry_budget"
	// VariantRequeueAnyFailure makes a failure requeue the job whatever the
	// failure code (budget and deadline still apply).
	VariantRequeueAnyFailure Variant = "requeue_any_failure"
	// VariantIgnoreAdmissionDeadline makes Lease pick queued jobs whatever
	// their admission_deadline; the sweeper's admission expiry still runs.
	VariantIgnoreAdmissionDeadline Variant = "ignore_admission_deadline"
	// VariantCommitNotIdempotent makes a repeated commit of an attempt
	// already committing answer attempt_not_committable instead of
	// commit_pending, so the gateway's re-run after an infrastructure error
	// is refused.
	VariantCommitNotIdempotent Variant = "commit_not_idempotent"
	// VariantNoOutputSeal publishes every upload to an output key whatever
	// the attempt's status: a PUT after the claim replaces the verified,
	// committed output.
	VariantNoOutputSeal Variant = "no_output_seal"
)

// variants are the service layer's broken variants (Variants, CheckVariant).
var variants = variantset.New("server", VariantNoEpochCheck, VariantCommitFromCancelling, VariantNoTokenCheck,
	VariantCancelQueuedNoop, VariantCommitTx1IgnoresCancelling, VariantProgressIgnoresDevice,
	VariantCommitIgnoresAttemptStatus, VariantIgnoreRetryBudget, VariantRequeueAnyFailure,
	VariantIgnoreAdmissionDeadline, VariantCommitNotIdempotent, VariantNoOutputSeal)

// variant is the one broken variant a Service runs; each hook is true only
// under its own variant.
type variant struct{ m Variant }

func newVariant(m Variant) variant { return variant{m: variants.Must(m)} }

func (v variant) noEpochCheck() bool               { return v.m == VariantNoEpochCheck }
func (v variant) noTokenCheck() bool               { return v.m == VariantNoTokenCheck }
func (v variant) commitFromCancelling() bool       { return v.m == VariantCommitFromCancelling }
func (v variant) cancelQueuedNoop() bool           { return v.m == VariantCancelQueuedNoop }
func (v variant) commitTx1IgnoresCancelling() bool { return v.m == VariantCommitTx1IgnoresCancelling }
func (v variant) progressIgnoresDevice() bool      { return v.m == VariantProgressIgnoresDevice }
func (v variant) commitIgnoresAttemptStatus() bool { return v.m == VariantCommitIgnoresAttemptStatus }
func (v variant) ignoreRetryBudget() bool          { return v.m == VariantIgnoreRetryBudget }
func (v variant) requeueAnyFailure() bool          { return v.m == VariantRequeueAnyFailure }
func (v variant) ignoreAdmissionDeadline() bool    { return v.m == VariantIgnoreAdmissionDeadline }
func (v variant) commitNotIdempotent() bool        { return v.m == VariantCommitNotIdempotent }
func (v variant) noOutputSeal() bool               { return v.m == VariantNoOutputSeal }
