package protocol

import "time"

// HoldStatus is the state of the hold a job places on its buyer's balance.
type HoldStatus string

// Hold statuses: held until the job is terminal, then settled exactly once.
const (
	HoldHeld     HoldStatus = "held"
	HoldCaptured HoldStatus = "captured"
	HoldReleased HoldStatus = "released"
)

// DeviceStatus is the state of a paired device.
type DeviceStatus string

// Device statuses.
const (
	DeviceOnline  DeviceStatus = "online"
	DeviceOffline DeviceStatus = "offline"
	DeviceRevoked DeviceStatus = "revoked"
)

// Snapshot is the projected state of an implementation: the rows of the
// contract's tables that the harness compares after every step. The model and
// the Postgres layer both produce it, each from its own storage.
type Snapshot struct {
	// Jobs in (created_at, id) order.
	Jobs []JobRow
	// Attempts in job order, then attempt_number.
	Attempts []AttemptRow
	// Buyers and Devices in id order.
	Buyers  []BuyerRow
	Devices []DeviceRow
	// Journal in append order.
	Journal []EventRow
}

// JobRow projects jobs plus its hold and outbox rows.
type JobRow struct {
	ID, BuyerID, Service string
	Status               JobStatus
	FailureCode          FailureCode
	MaxAttempts          int
	AttemptCount         int
	// WithdrawnCount is how many of the job's attempts were withdrawn
	// offers (failure code offer_withdrawn), which spend no budget: the
	// job has spent AttemptCount - WithdrawnCount of its MaxAttempts.
	WithdrawnCount    int
	CreatedAt         time.Time
	AdmissionDeadline time.Time
	HoldStatus        HoldStatus
	HoldCents         int64
	// Webhooks counts the job's outbox rows.
	Webhooks           int
	OutputSHA256       string
	SucceededAttemptID string
}

// AttemptRow projects job_attempts.
type AttemptRow struct {
	ID, JobID, DeviceID string
	Number              int
	Status              AttemptStatus
	LeaseEpoch          int
	LeaseExpiresAt      time.Time
	TokenHash           string
	FailureCode         FailureCode
}

// BuyerRow projects a buyer's money: balance, open holds and captures.
type BuyerRow struct {
	ID                                     string
	BalanceCents, HeldCents, CapturedCents int64
}

// DeviceRow projects devices.
type DeviceRow struct {
	ID           string
	Status       DeviceStatus
	LiveAttempts int
	LastSeenAt   time.Time
}

// EventRow projects one job_events journal row. AttemptID is empty for a job
// row; From is empty for an insert.
type EventRow struct {
	Kind      string // "job" or "attempt"
	JobID     string
	AttemptID string
	From, To  string
	Code      string
	Actor     Actor
	At        time.Time
}
