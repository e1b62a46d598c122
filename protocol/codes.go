package protocol

// FailureCode is a machine code for why an attempt or job failed.
type FailureCode string

// Failure codes an agent may send in fail (SPEC section 3).
const (
	FailNoCapacity         FailureCode = "no_capacity"
	FailLeaseExpired       FailureCode = "lease_expired"
	FailDownloadFailed     FailureCode = "download_failed"
	FailUploadFailed       FailureCode = "upload_failed"
	FailProviderOffline    FailureCode = "provider_offline"
	FailInternalError      FailureCode = "internal_error"
	FailRunnerFailed       FailureCode = "runner_failed"
	FailVerificationFailed FailureCode = "verification_failed"
	FailCommitConflict     FailureCode = "commit_conflict"
	FailBuyerCancelled     FailureCode = "buyer_cancelled"
)

// Failure codes the control plane sets and an agent cannot send (a fail
// carrying one is bad_failure_code).
const (
	// FailAdmissionExpired is the job failure code of a queued job whose
	// admission deadline passed.
	FailAdmissionExpired FailureCode = "admission_expired"
	// FailOfferWithdrawn is the attempt failure code of an offer the
	// gateway leased but never delivered (Withdraw): such an attempt does
	// not count against the job's max_attempts.
	FailOfferWithdrawn FailureCode = "offer_withdrawn"
)

// ControlPlaneCodes lists the failure codes only the control plane sets.
var ControlPlaneCodes = []FailureCode{FailAdmissionExpired, FailOfferWithdrawn}

// FailureCodes lists the codes an agent may send, retryable ones first.
var FailureCodes = []FailureCode{FailNoCapacity, FailLeaseExpired, FailDownloadFailed, FailUploadFailed,
	FailProviderOffline, FailInternalError, FailRunnerFailed, FailVerificationFailed, FailCommitConflict,
	FailBuyerCancelled}

// Valid reports whether an agent may send c.
func (c FailureCode) Valid() bool {
	for _, k := range FailureCodes {
		if k == c {
			return true
		}
	}
	return false
}

// IsRetryable reports whether the control plane may requeue a job after an
// attempt failed with c. It is policy: the agent never decides requeue, and a
// retryable code is still gated by the attempt budget and the deadline.
func (c FailureCode) IsRetryable() bool {
	switch c {
	case FailNoCapacity, FailLeaseExpired, FailDownloadFailed, FailUploadFailed, FailProviderOffline, FailInternalError:
		return true
	}
	return false
}

// Code is the outcome of one operation of SPEC section 3. The same codes are
// returned by the model, by the Postgres service layer and (where they reach
// an agent or buyer) on the wire, so replies can be compared one to one.
type Code string

// Operation outcomes.
const (
	// CreateJob.
	CodeCreated             Code = "created"
	CodeValidation          Code = "validation_error"
	CodeInsufficientFunds   Code = "insufficient_funds"
	CodeIdempotencyConflict Code = "idempotency_conflict"
	// Lease.
	CodeLeaseOffer Code = "lease_offer"
	CodeNoJob      Code = "no_job"
	CodeNoSlot     Code = "no_slot"
	// Progress.
	CodeProgressOK    Code = "progress_ok"
	CodeLeaseConflict Code = "lease_conflict"
	// Commit. CodeCommitPending is transaction 1's acceptance: the attempt is
	// committing and verification is next. It never reaches the wire.
	CodeCommitPending         Code = "commit_pending"
	CodeCommitOK              Code = "commit_ok"
	CodeCommitConflict        Code = "commit_conflict"
	CodeAttemptNotCommittable Code = "attempt_not_committable"
	CodeLeaseExpired          Code = "lease_expired"
	CodeJobCancelled          Code = "job_cancelled"
	CodeVerificationFailed    Code = "verification_failed"
	// Fail.
	CodeFailOK         Code = "fail_ok"
	CodeFailConflict   Code = "fail_conflict"
	CodeBadFailureCode Code = "bad_failure_code"
	// Withdraw (the gateway's, never a frame): the undelivered offer's
	// attempt ended uncharged, or the withdrawal was refused.
	CodeWithdrawn        Code = "withdrawn"
	CodeWithdrawConflict Code = "withdraw_conflict"
	// Cancel.
	CodeCancelled   Code = "cancelled"
	CodeCancelling  Code = "cancelling"
	CodeJobTerminal Code = "job_terminal"
	CodeNotFound    Code = "not_found"
	// Upload (an artifact PUT to an attempt's output key, HTTP): accepted
	// while the attempt is in a lease phase, sealed from its claim on.
	CodeUploadOK     Code = "upload_ok"
	CodeOutputSealed Code = "output_sealed"
	// PauseService and ResumeService (an operator's): the service is now
	// paused or offered again, or already was (pausing and resuming are
	// idempotent); an unknown service is not_found.
	CodePaused        Code = "paused"
	CodeAlreadyPaused Code = "already_paused"
	CodeResumed       Code = "resumed"
	CodeNotPaused     Code = "not_paused"
)

// ConflictReason says why progress got lease_conflict.
type ConflictReason string

// lease_conflict reasons of SPEC section 3, and ReasonAttemptLost.
const (
	ReasonIdentityMismatch ConflictReason = "identity_mismatch"
	ReasonAttemptTerminal  ConflictReason = "attempt_terminal"
	ReasonLeaseExpired     ConflictReason = "lease_expired"
	ReasonJobCancelling    ConflictReason = "job_cancelling"
	ReasonPhaseRegression  ConflictReason = "phase_regression"
	// ReasonAttemptLost is never a reply: the gateway sends it unsolicited
	// when the sweeper has ended the attempt (lost, lease expired), so the
	// device stops it and its slot is offered again (SPEC section 5).
	ReasonAttemptLost ConflictReason = "attempt_lost"
)

// Actor names who caused a journal row (job_events.actor).
type Actor string

// Journal actors.
const (
	ActorBuyer   Actor = "buyer"
	ActorMatcher Actor = "matcher"
	ActorDevice  Actor = "device"
	ActorVerify  Actor = "verifier"
	ActorSweeper Actor = "sweeper"
	// ActorOperator is a person at the console or `rendermac admin`; a job
	// row names which operator (job_events.operator_id), a pause row too.
	ActorOperator Actor = "operator"
)
