package model

import (
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Sweep runs the sweeper's four steps in order, each over jobs in
// (created_at, id) order: expired leases become lost (the job cancelled,
// requeued or failed with lease_expired), abandoned verifications are re-run
// through transaction 2, queued jobs past their deadline fail with
// admission_expired, and online devices silent for the heartbeat window go
// offline. The result counts each effect; Succeeded, Failed and Cancelled
// count the job terminal transitions of all four steps.
func (m *ExecutionModel) Sweep(now time.Time) protocol.SweepResult {
	now = normalize(now)
	var r protocol.SweepResult
	before := m.terminal
	m.sweepLost(now, &r)
	m.sweepCommitting(now, &r)
	m.sweepAdmission(now, &r)
	m.sweepDevices(now, &r)
	r.Succeeded = m.terminal.succeeded - before.succeeded
	r.Failed = m.terminal.failed - before.failed
	r.Cancelled = m.terminal.cancelled - before.cancelled
	return r
}

// openSnapshot copies the open list into scratch, because the steps below
// take terminal jobs off open while iterating.
func (m *ExecutionModel) openSnapshot() []*job {
	m.scratch = append(m.scratch[:0], m.open...)
	return m.scratch
}

// sweepLost is Sweep step 1.
func (m *ExecutionModel) sweepLost(now time.Time, r *protocol.SweepResult) {
	for _, j := range m.openSnapshot() {
		for _, a := range j.attempts {
			if !a.row.Status.LeasePhase() || a.row.LeaseExpiresAt.After(now) {
				continue
			}
			m.setAttempt(a, protocol.AttemptLost, protocol.FailLeaseExpired, protocol.ActorSweeper, now)
			r.Lost++
			switch {
			case j.row.Status == protocol.JobCancelling:
				m.setJob(j, protocol.JobCancelled, "", protocol.ActorSweeper, now)
			case m.mayRequeue(j, now):
				m.requeue(j, protocol.ActorSweeper, now)
				r.Requeued++
			default:
				m.setJob(j, protocol.JobFailed, protocol.FailLeaseExpired, protocol.ActorSweeper, now)
			}
		}
	}
}

// sweepCommitting is Sweep step 2: a committing attempt past its
// verification deadline was abandoned between the transactions, so the
// sweeper finishes it with the recorded outcome.
func (m *ExecutionModel) sweepCommitting(now time.Time, r *protocol.SweepResult) {
	for _, j := range m.openSnapshot() {
		for _, a := range j.attempts {
			if a.row.Status == protocol.AttemptCommitting && !a.row.LeaseExpiresAt.After(now) {
				r.Reverified++
				m.finishCommit(now, a, protocol.ActorSweeper)
			}
		}
	}
}

// sweepAdmission is Sweep step 3.
func (m *ExecutionModel) sweepAdmission(now time.Time, r *protocol.SweepResult) {
	for _, j := range m.openSnapshot() {
		if j.row.Status == protocol.JobQueued && !j.row.AdmissionDeadline.After(now) {
			m.setJob(j, protocol.JobFailed, protocol.FailAdmissionExpired, protocol.ActorSweeper, now)
			r.AdmissionExpired++
		}
	}
}

// sweepDevices is Sweep step 4, in device id order.
func (m *ExecutionModel) sweepDevices(now time.Time, r *protocol.SweepResult) {
	for _, d := range m.deviceList {
		if d.status == protocol.DeviceOnline && !d.lastSeen.Add(m.cfg.HeartbeatWindow).After(now) {
			d.status = protocol.DeviceOffline
			r.Offline++
		}
	}
}
