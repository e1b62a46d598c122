package protocol

import "time"

// CreateJobRequest is a buyer's order (SPEC section 3, CreateJob).
type CreateJobRequest struct {
	BuyerID         string            `json:"-"`
	Service         string            `json:"service"`
	Params          map[string]string `json:"params"`
	Input           InputRef          `json:"input"`
	MaxAttempts     int               `json:"max_attempts"`
	AdmissionWindow time.Duration     `json:"-"`
	IdempotencyKey  string            `json:"-"`
}

// CreateJobFields are the fields a CreateJob refusal names, in the order
// the checks run (docs/semantics.md, CreateJob step 1): a request invalid
// in several fields is refused naming the first of them. "buyer" is the
// not_found of an unknown buyer, the rest are validation_error fields. The
// model and the server keep their own checks (they share no logic); this
// table is what tests hold every implementation, the HTTP API included, to.
var CreateJobFields = []string{
	"buyer", "service", "max_attempts", "admission_window",
	"input.bytes", "input.sha256", "params", "idempotency_key",
}

// Admission windows accepted by CreateJob.
const (
	AdmissionWindowMin     = time.Second
	AdmissionWindowMax     = 7 * 24 * time.Hour
	AdmissionWindowDefault = time.Hour
)

// Reply is the outcome of one operation. Every implementation (model,
// Postgres service layer, gateway) fills the same fields for the same code,
// so the harness can compare replies field by field; Message is for people
// and is never compared.
type Reply struct {
	Code Code
	// Reason is set for lease_conflict.
	Reason ConflictReason
	// Field names the offending field of a validation_error.
	Field string
	// Status is the attempt's status for attempt_not_committable.
	Status AttemptStatus

	JobID         string
	AttemptID     string
	AttemptNumber int
	LeaseEpoch    int
	// CommitToken is the plaintext secret, set only on lease_offer.
	CommitToken string
	// LeaseExpiresAt is set on lease_offer and progress_ok.
	LeaseExpiresAt time.Time
	// Requeued is set on fail_ok and withdrawn.
	Requeued bool
	// Existing marks a created reply that returned an earlier job for the
	// same idempotency key.
	Existing bool

	Message string
}

// Withdrawal names an offer the gateway leased but could not deliver, with
// the identities and the plaintext token of its lease_offer, for Withdraw
// (SPEC section 3). It is never a wire frame: the device never saw it.
type Withdrawal struct {
	JobID       string
	AttemptID   string
	LeaseEpoch  int
	CommitToken string
}

// SweepResult counts what one Sweep changed.
type SweepResult struct {
	// Lost attempts whose lease expired in a lease phase.
	Lost int
	// Requeued jobs after a lost attempt.
	Requeued int
	// Reverified committing attempts whose verification was abandoned.
	Reverified int
	// AdmissionExpired queued jobs past their deadline.
	AdmissionExpired int
	// Terminal counts job terminal transitions by status.
	Succeeded, Failed, Cancelled int
	// Offline devices silent past the heartbeat window.
	Offline int
}

// PruneResult counts what one prune removed: finished jobs older than its
// bound and their attempts, journal rows, holds and webhook (outbox) rows
// (docs/semantics.md, "Retention").
type PruneResult struct {
	Jobs, Attempts, Events, Holds, Webhooks int
}
