package protocol

import "fmt"

// JobStatus is the status of a buyer-visible job (jobs.status).
type JobStatus string

// Job statuses of SPEC section 2.
const (
	JobQueued     JobStatus = "queued"
	JobActive     JobStatus = "active"
	JobVerifying  JobStatus = "verifying"
	JobCancelling JobStatus = "cancelling"
	JobSucceeded  JobStatus = "succeeded"
	JobCancelled  JobStatus = "cancelled"
	JobFailed     JobStatus = "failed"
)

// JobStatuses lists every job status in table order.
var JobStatuses = []JobStatus{JobQueued, JobActive, JobVerifying, JobCancelling, JobSucceeded, JobCancelled, JobFailed}

// jobTransitions is SPEC section 2's job table. Terminal statuses have no
// entry, so every transition out of them is refused; cancelling has no
// succeeded entry, which is what makes cancelling -> succeeded impossible.
var jobTransitions = map[JobStatus][]JobStatus{
	JobQueued:     {JobActive, JobCancelled, JobFailed},
	JobActive:     {JobQueued, JobVerifying, JobCancelling, JobFailed},
	JobVerifying:  {JobSucceeded, JobCancelling, JobFailed},
	JobCancelling: {JobCancelled, JobFailed},
}

// Valid reports whether s is a known job status.
func (s JobStatus) Valid() bool {
	for _, k := range JobStatuses {
		if k == s {
			return true
		}
	}
	return false
}

// Terminal reports whether s has an empty outbound set.
func (s JobStatus) Terminal() bool {
	return s == JobSucceeded || s == JobCancelled || s == JobFailed
}

// TransitionError is returned for a status change the tables do not allow.
type TransitionError struct {
	Entity   string // "job" or "attempt"
	From, To string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("illegal %s transition %s -> %s", e.Entity, e.From, e.To)
}

// AssertJobTransition returns nil only when from -> to is in the job table.
func AssertJobTransition(from, to JobStatus) error {
	for _, s := range jobTransitions[from] {
		if s == to {
			return nil
		}
	}
	return &TransitionError{Entity: "job", From: string(from), To: string(to)}
}

// AttemptStatus is the status of one execution attempt (job_attempts.status).
// The four lease phases are attempt statuses too.
type AttemptStatus string

// Attempt statuses of SPEC section 2.
const (
	AttemptLeased      AttemptStatus = "leased"
	AttemptDownloading AttemptStatus = "downloading"
	AttemptRunning     AttemptStatus = "running"
	AttemptUploading   AttemptStatus = "uploading"
	AttemptCommitting  AttemptStatus = "committing"
	AttemptSucceeded   AttemptStatus = "succeeded"
	AttemptFailed      AttemptStatus = "failed"
	AttemptLost        AttemptStatus = "lost"
	AttemptCancelled   AttemptStatus = "cancelled"
)

// AttemptStatuses lists every attempt status in table order.
var AttemptStatuses = []AttemptStatus{AttemptLeased, AttemptDownloading, AttemptRunning, AttemptUploading,
	AttemptCommitting, AttemptSucceeded, AttemptFailed, AttemptLost, AttemptCancelled}

var attemptTransitions = map[AttemptStatus][]AttemptStatus{
	AttemptLeased:      {AttemptDownloading, AttemptRunning, AttemptUploading, AttemptFailed, AttemptLost, AttemptCancelled},
	AttemptDownloading: {AttemptRunning, AttemptUploading, AttemptFailed, AttemptLost, AttemptCancelled},
	AttemptRunning:     {AttemptUploading, AttemptFailed, AttemptLost, AttemptCancelled},
	AttemptUploading:   {AttemptCommitting, AttemptFailed, AttemptLost, AttemptCancelled},
	AttemptCommitting:  {AttemptSucceeded, AttemptFailed, AttemptCancelled},
}

// Valid reports whether s is a known attempt status.
func (s AttemptStatus) Valid() bool {
	for _, k := range AttemptStatuses {
		if k == s {
			return true
		}
	}
	return false
}

// Live reports whether the attempt still holds authority (leased..committing).
func (s AttemptStatus) Live() bool {
	return s.LeasePhase() || s == AttemptCommitting
}

// Terminal reports whether s has an empty outbound set.
func (s AttemptStatus) Terminal() bool { return s.Valid() && !s.Live() }

// LeasePhase reports whether s is one of the ranked lease phases.
func (s AttemptStatus) LeasePhase() bool { return PhaseRank(s) > 0 }

// PhaseRank is the rank of a lease phase: leased 1 < downloading 2 <
// running 3 < uploading 4; 0 for anything that is not a lease phase.
func PhaseRank(s AttemptStatus) int {
	switch s {
	case AttemptLeased:
		return 1
	case AttemptDownloading:
		return 2
	case AttemptRunning:
		return 3
	case AttemptUploading:
		return 4
	}
	return 0
}

// AssertAttemptTransition returns nil only when from -> to is in the attempt table.
func AssertAttemptTransition(from, to AttemptStatus) error {
	for _, s := range attemptTransitions[from] {
		if s == to {
			return nil
		}
	}
	return &TransitionError{Entity: "attempt", From: string(from), To: string(to)}
}
