package model

import (
	"fmt"
	"slices"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Journal kinds (job_events.kind).
const (
	kindJob     = "job"
	kindAttempt = "attempt"
)

// record appends one journal row. Every status change goes through here, so
// the journal is complete by construction and the checker can replay it.
func (m *ExecutionModel) record(kind, jobID, attemptID, from, to string, code protocol.FailureCode,
	actor protocol.Actor, now time.Time) {
	m.journal = append(m.journal, protocol.EventRow{Kind: kind, JobID: jobID, AttemptID: attemptID,
		From: from, To: to, Code: string(code), Actor: actor, At: now})
}

// setJob moves a job through the table. A refused transition is a broken
// internal invariant: the model panics rather than write it. code is the
// job's failure_code when to is failed, and the journal row's code. A
// terminal status settles the hold and appends the webhook in the same step.
func (m *ExecutionModel) setJob(j *job, to protocol.JobStatus, code protocol.FailureCode, actor protocol.Actor,
	now time.Time) {
	if err := protocol.AssertJobTransition(j.row.Status, to); err != nil {
		panic(fmt.Sprintf("sim: job %s: %v", j.row.ID, err))
	}
	m.writeJob(j, to, code, actor, now)
}

// writeJob writes a job status and its journal row without the assert. Only
// setJob and VariantCommitFromCancelling call it.
func (m *ExecutionModel) writeJob(j *job, to protocol.JobStatus, code protocol.FailureCode, actor protocol.Actor,
	now time.Time) {
	from := j.row.Status
	j.row.Status = to
	if to == protocol.JobFailed {
		j.row.FailureCode = code
	}
	m.record(kindJob, j.row.ID, "", string(from), string(to), code, actor, now)
	m.touch(j)
	if to.Terminal() {
		j.finishedAt = now
		m.settle(j)
	}
}

// setAttempt moves an attempt through the table (panics when refused).
// code is the attempt's failure_code and the journal row's code.
func (m *ExecutionModel) setAttempt(a *attempt, to protocol.AttemptStatus, code protocol.FailureCode,
	actor protocol.Actor, now time.Time) {
	from := a.row.Status
	if err := protocol.AssertAttemptTransition(from, to); err != nil {
		panic(fmt.Sprintf("sim: attempt %s of job %s: %v", a.row.ID, a.row.JobID, err))
	}
	a.row.Status = to
	if code != "" {
		a.row.FailureCode = code
	}
	m.record(kindAttempt, a.row.JobID, a.row.ID, string(from), string(to), code, actor, now)
	m.touch(a.job)
	if !to.Live() {
		m.releaseSlot(a)
	}
}

// settle settles a terminal job's hold exactly once (captured on success,
// released otherwise), appends its webhook and takes it off the open list.
func (m *ExecutionModel) settle(j *job) {
	if j.row.HoldStatus != protocol.HoldHeld {
		panic(fmt.Sprintf("sim: job %s: settling a hold that is %s", j.row.ID, j.row.HoldStatus))
	}
	b := j.buyer
	b.held -= j.row.HoldCents
	switch j.row.Status {
	case protocol.JobSucceeded:
		j.row.HoldStatus = protocol.HoldCaptured
		b.captured += j.row.HoldCents
		m.terminal.succeeded++
	case protocol.JobCancelled:
		j.row.HoldStatus = protocol.HoldReleased
		b.balance += j.row.HoldCents
		m.terminal.cancelled++
	default:
		j.row.HoldStatus = protocol.HoldReleased
		b.balance += j.row.HoldCents
		m.terminal.failed++
	}
	j.settles++
	j.row.Webhooks++
	j.webhookEvent = j.row.Status
	if i, found := slices.BinarySearchFunc(m.open, j, compareJobs); found {
		m.open = slices.Delete(m.open, i, i+1)
	}
}

// releaseSlot frees the slot of an attempt that left the live set, in the
// same step as the transition that ended it.
func (m *ExecutionModel) releaseSlot(a *attempt) {
	if m.cfg.Variant == VariantKeepSlot {
		return
	}
	a.device.occupied--
	m.touchDevice(a.device)
}

// requeue sends a job back to the queue after its attempt ended, recording
// what the decision was based on so the checker can re-judge it.
func (m *ExecutionModel) requeue(j *job, actor protocol.Actor, now time.Time) {
	j.requeues = append(j.requeues, requeueFact{spent: j.spent(), maxAttempts: j.row.MaxAttempts,
		at: now, deadline: j.row.AdmissionDeadline})
	m.setJob(j, protocol.JobQueued, "", actor, now)
}

// spent is how many of its max_attempts the job has used: every attempt
// but the withdrawn offers.
func (j *job) spent() int { return j.row.AttemptCount - j.row.WithdrawnCount }

// mayRequeue is the retry policy after the live attempt of j ended with a
// retryable code: budget left (that attempt included) and deadline not
// reached.
func (m *ExecutionModel) mayRequeue(j *job, now time.Time) bool {
	if !now.Before(j.row.AdmissionDeadline) {
		return false
	}
	return m.cfg.Variant == VariantRequeuePastBudget || j.spent() < j.row.MaxAttempts
}

// finalizeCancel ends a cancelling job's live attempt and then the job, in
// that journal order: attempt cancelled (buyer_cancelled), job cancelled.
func (m *ExecutionModel) finalizeCancel(a *attempt, actor protocol.Actor, now time.Time) {
	m.setAttempt(a, protocol.AttemptCancelled, protocol.FailBuyerCancelled, actor, now)
	m.setJob(a.job, protocol.JobCancelled, "", actor, now)
}

// touch marks a job for the next CheckInvariants.
func (m *ExecutionModel) touch(j *job) {
	if !j.chk.dirty {
		j.chk.dirty = true
		m.chk.dirtyJobs = append(m.chk.dirtyJobs, j)
	}
}

// touchDevice marks a device for the next CheckInvariants.
func (m *ExecutionModel) touchDevice(d *device) {
	if !d.dirty {
		d.dirty = true
		m.chk.dirtyDevices = append(m.chk.dirtyDevices, d)
	}
}

// seen marks a device heard from at now (lease and accepted progress). A
// revoked device stays revoked: revocation is an operator's decision that no
// agent frame may undo.
func (d *device) seen(now time.Time) {
	d.lastSeen = now
	if d.status != protocol.DeviceRevoked {
		d.status = protocol.DeviceOnline
	}
}
