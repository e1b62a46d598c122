//go:build mutations

package server

import (
	"fmt"
	"slices"
)

// The mutations, only in a build with -tags mutations. Each exists to prove
// that the harness and the tests can fail: it removes a single fence and
// must be caught.
const (
	// MutationNoEpochCheck makes commit ignore the lease epoch.
	MutationNoEpochCheck Mutation = "no_epoch_check"
	// MutationCommitFromCancelling makes commit transaction 2 skip its check
	// for a cancelling job; the transition tables then refuse cancelling ->
	// succeeded, or the job fails where it should have been cancelled.
	MutationCommitFromCancelling Mutation = "commit_from_cancelling"
	// MutationNoTokenCheck makes commit and fail ignore the commit token.
	MutationNoTokenCheck Mutation = "no_token_check"
	// MutationCancelQueuedNoop makes Cancel answer a queued job cancelled
	// without writing anything: the job stays queued and is leased.
	MutationCancelQueuedNoop Mutation = "cancel_queued_noop"
	// MutationCommitTx1IgnoresCancelling makes commit transaction 1 skip its
	// check for a cancelling job: the output is claimed instead of the
	// cancellation being finalized.
	MutationCommitTx1IgnoresCancelling Mutation = "commit_tx1_ignores_cancelling"
	// MutationProgressIgnoresDevice makes Progress compare job, attempt and
	// epoch but not the session's device: another device renews the lease.
	MutationProgressIgnoresDevice Mutation = "progress_ignores_device"
	// MutationCommitIgnoresAttemptStatus makes commit transaction 1 skip the
	// uploading/committing check: a replayed commit of a terminal attempt
	// reaches the transition assertion, which reports ErrInternal.
	MutationCommitIgnoresAttemptStatus Mutation = "commit_ignores_attempt_status"
	// MutationIgnoreRetryBudget makes a retryable failure requeue the job
	// without comparing attempt_number to max_attempts.
	MutationIgnoreRetryBudget Mutation = "ignore_retry_budget"
	// MutationRequeueAnyFailure makes a failure requeue the job whatever the
	// failure code (budget and deadline still apply).
	MutationRequeueAnyFailure Mutation = "requeue_any_failure"
	// MutationIgnoreAdmissionDeadline makes Lease pick queued jobs whatever
	// their admission_deadline; the sweeper's admission expiry still runs.
	MutationIgnoreAdmissionDeadline Mutation = "ignore_admission_deadline"
	// MutationCommitNotIdempotent makes a repeated commit of an attempt
	// already committing answer attempt_not_committable instead of
	// commit_pending, so the gateway's re-run after an infrastructure error
	// is refused.
	MutationCommitNotIdempotent Mutation = "commit_not_idempotent"
	// MutationNoOutputSeal publishes every upload to an output key whatever
	// the attempt's status: a PUT after the claim replaces the verified,
	// committed output.
	MutationNoOutputSeal Mutation = "no_output_seal"
)

// Mutations lists the service layer's broken variants.
func Mutations() []Mutation {
	return []Mutation{MutationNoEpochCheck, MutationCommitFromCancelling, MutationNoTokenCheck,
		MutationCancelQueuedNoop, MutationCommitTx1IgnoresCancelling, MutationProgressIgnoresDevice,
		MutationCommitIgnoresAttemptStatus, MutationIgnoreRetryBudget, MutationRequeueAnyFailure,
		MutationIgnoreAdmissionDeadline, MutationCommitNotIdempotent, MutationNoOutputSeal}
}

// CheckMutation reports whether m is MutationNone or one of Mutations.
func CheckMutation(m Mutation) error {
	if m != MutationNone && !slices.Contains(Mutations(), m) {
		return fmt.Errorf("unknown server mutation %q (known: %v)", m, Mutations())
	}
	return nil
}

// variant is the one broken variant a Service runs; each hook is true only
// under its own mutation.
type variant struct{ m Mutation }

func newVariant(m Mutation) variant {
	if err := CheckMutation(m); err != nil {
		panic("server: " + err.Error())
	}
	return variant{m: m}
}

func (v variant) noEpochCheck() bool               { return v.m == MutationNoEpochCheck }
func (v variant) noTokenCheck() bool               { return v.m == MutationNoTokenCheck }
func (v variant) commitFromCancelling() bool       { return v.m == MutationCommitFromCancelling }
func (v variant) cancelQueuedNoop() bool           { return v.m == MutationCancelQueuedNoop }
func (v variant) commitTx1IgnoresCancelling() bool { return v.m == MutationCommitTx1IgnoresCancelling }
func (v variant) progressIgnoresDevice() bool      { return v.m == MutationProgressIgnoresDevice }
func (v variant) commitIgnoresAttemptStatus() bool { return v.m == MutationCommitIgnoresAttemptStatus }
func (v variant) ignoreRetryBudget() bool          { return v.m == MutationIgnoreRetryBudget }
func (v variant) requeueAnyFailure() bool          { return v.m == MutationRequeueAnyFailure }
func (v variant) ignoreAdmissionDeadline() bool    { return v.m == MutationIgnoreAdmissionDeadline }
func (v variant) commitNotIdempotent() bool        { return v.m == MutationCommitNotIdempotent }
func (v variant) noOutputSeal() bool               { return v.m == MutationNoOutputSeal }
