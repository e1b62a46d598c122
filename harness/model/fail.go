package model

import (
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Fail gives an attempt up. An unknown code answers bad_failure_code before
// any lookup; an identity or token mismatch, or an attempt no longer in a
// lease phase, answers fail_conflict; neither mutates anything, not even the
// device's liveness. An accepted fail heartbeats the device. An expired
// but unswept lease may still fail. Then the attempt fails with the code and
// the job is cancelled (if cancelling), requeued (retryable code, budget
// left counting this attempt and no withdrawn one, deadline ahead; Requeued
// true) or failed with the code.
func (m *ExecutionModel) Fail(now time.Time, deviceID string, f protocol.Fail) protocol.Reply {
	now = normalize(now)
	if !f.FailureCode.Valid() {
		return protocol.Reply{Code: protocol.CodeBadFailureCode}
	}
	a, ok, epochOK := m.authority(deviceID, f.JobID, f.AttemptID, f.LeaseEpoch, f.CommitToken)
	if !ok || !epochOK || !a.row.Status.LeasePhase() {
		return protocol.Reply{Code: protocol.CodeFailConflict}
	}
	a.device.seen(now) // accepted, so a heartbeat; the refusals above are not
	j := a.job
	m.setAttempt(a, protocol.AttemptFailed, f.FailureCode, protocol.ActorDevice, now)
	switch {
	case j.row.Status == protocol.JobCancelling:
		m.setJob(j, protocol.JobCancelled, "", protocol.ActorDevice, now)
	case f.FailureCode.IsRetryable() && m.mayRequeue(j, now):
		m.requeue(j, protocol.ActorDevice, now)
		return protocol.Reply{Code: protocol.CodeFailOK, Requeued: true}
	default:
		m.setJob(j, protocol.JobFailed, f.FailureCode, protocol.ActorDevice, now)
	}
	return protocol.Reply{Code: protocol.CodeFailOK}
}

// Cancel is the buyer's cancel. A job of another buyer is not_found, as if it
// did not exist. queued: cancelled at once (hold released, webhook).
// active or verifying: cancelling, and the live attempt is left as it is but
// has lost its authority. cancelling: cancelling again, nothing changes.
// Terminal: job_terminal.
func (m *ExecutionModel) Cancel(now time.Time, buyerID, jobID string) protocol.Reply {
	now = normalize(now)
	j, ok := m.jobs[jobID]
	if !ok || j.row.BuyerID != buyerID {
		return protocol.Reply{Code: protocol.CodeNotFound}
	}
	switch s := j.row.Status; {
	case s == protocol.JobQueued:
		m.setJob(j, protocol.JobCancelled, "", protocol.ActorBuyer, now)
		return protocol.Reply{Code: protocol.CodeCancelled}
	case s == protocol.JobActive || s == protocol.JobVerifying:
		m.setJob(j, protocol.JobCancelling, "", protocol.ActorBuyer, now)
		return protocol.Reply{Code: protocol.CodeCancelling}
	case s == protocol.JobCancelling:
		return protocol.Reply{Code: protocol.CodeCancelling}
	}
	return protocol.Reply{Code: protocol.CodeJobTerminal}
}
