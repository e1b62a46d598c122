package model

import (
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// authority is the fence of commit and fail: the attempt named by attemptID,
// whether it belongs to jobID and deviceID and the token hashes to its
// stored hash, and separately whether the epoch matches (so that
// VariantNoEpochCheck can drop exactly that comparison).
func (m *ExecutionModel) authority(deviceID, jobID, attemptID string, epoch int, token string) (
	a *attempt, ok, epochOK bool) {
	a = m.attempts[attemptID]
	if a == nil || a.row.JobID != jobID || a.row.DeviceID != deviceID {
		return a, false, false
	}
	if !protocol.VerifyCommitToken(token, a.row.TokenHash) {
		return a, false, false
	}
	return a, true, a.row.LeaseEpoch == epoch
}

// CommitBegin is commit transaction 1. The first failing check answers and
// mutates nothing: commit_conflict (identity or token), then
// attempt_not_committable (with the attempt's status), then lease_expired.
// On a cancelling job it finalizes the cancellation and answers
// job_cancelled. A repeated commit of a committing attempt changes nothing.
// Otherwise the attempt goes uploading -> committing with the claimed output
// and outputOK as its verification outcome, the lease becomes the
// verification deadline and the job goes active -> verifying. Both accepting
// paths answer commit_pending. Every path past the three refusals (which
// mutate nothing) heartbeats the device.
func (m *ExecutionModel) CommitBegin(now time.Time, deviceID string, c protocol.Commit, outputOK bool) protocol.Reply {
	now = normalize(now)
	a, ok, epochOK := m.authority(deviceID, c.JobID, c.AttemptID, c.LeaseEpoch, c.CommitToken)
	if !ok || (!epochOK && m.cfg.Variant != VariantNoEpochCheck) {
		return protocol.Reply{Code: protocol.CodeCommitConflict}
	}
	if s := a.row.Status; s != protocol.AttemptUploading && s != protocol.AttemptCommitting {
		return protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: s}
	}
	if a.row.Status == protocol.AttemptUploading && !a.row.LeaseExpiresAt.After(now) {
		return protocol.Reply{Code: protocol.CodeLeaseExpired}
	}
	// Past the fence the frame is accepted, and an accepted frame is a
	// heartbeat; the rejections above heartbeat nothing.
	a.device.seen(now)
	if a.job.row.Status == protocol.JobCancelling {
		m.finalizeCancel(a, protocol.ActorDevice, now)
		return protocol.Reply{Code: protocol.CodeJobCancelled}
	}
	if a.row.Status == protocol.AttemptUploading {
		m.enterCommitting(now, a, deviceID, c, outputOK)
	}
	return protocol.Reply{Code: protocol.CodeCommitPending}
}

// enterCommitting is CommitBegin step 6. The verification outcome also
// requires the claimed key to be the attempt-scoped key: that part of
// verification needs no artifact store, and the server's verifier refuses a
// foreign key whatever the store holds.
func (m *ExecutionModel) enterCommitting(now time.Time, a *attempt, deviceID string, c protocol.Commit, outputOK bool) {
	// Recorded from what was presented, not from the decision, so that the
	// checker can tell a fence that was skipped from one that held.
	a.fence = commitFence{entered: true, jobID: c.JobID, deviceID: deviceID, epoch: c.LeaseEpoch, tokenOK: true,
		unexpired: a.row.LeaseExpiresAt.After(now)}
	m.setAttempt(a, protocol.AttemptCommitting, "", protocol.ActorDevice, now)
	a.claimed = c.Output
	a.outputOK = outputOK && c.Output.Key == protocol.OutputKey(a.row.JobID, a.row.ID)
	a.row.LeaseExpiresAt = normalize(now.Add(m.cfg.LeaseTTL))
	m.setJob(a.job, protocol.JobVerifying, "", protocol.ActorDevice, now)
}

// CommitFinish is commit transaction 2, run with the outcome recorded by
// CommitBegin. An attempt that is missing, of another job, or not committing
// answers attempt_not_committable (Status empty when there is no such
// attempt of the job). A cancelling job is cancelled (job_cancelled); a
// failed verification fails attempt and job with verification_failed, not
// retried; otherwise attempt and job succeed with the output recorded and the
// hold captured (commit_ok).
func (m *ExecutionModel) CommitFinish(now time.Time, jobID, attemptID string) protocol.Reply {
	now = normalize(now)
	a := m.attempts[attemptID]
	if a == nil || a.row.JobID != jobID {
		return protocol.Reply{Code: protocol.CodeAttemptNotCommittable}
	}
	if a.row.Status != protocol.AttemptCommitting {
		return protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: a.row.Status}
	}
	return m.finishCommit(now, a, protocol.ActorVerify)
}

// finishCommit is transaction 2 on a committing attempt; the sweeper reuses
// it for abandoned verifications with its own actor.
func (m *ExecutionModel) finishCommit(now time.Time, a *attempt, actor protocol.Actor) protocol.Reply {
	j := a.job
	cancelling := j.row.Status == protocol.JobCancelling
	if cancelling && m.cfg.Variant != VariantCommitFromCancelling {
		m.finalizeCancel(a, actor, now)
		return protocol.Reply{Code: protocol.CodeJobCancelled}
	}
	if !a.outputOK {
		m.setAttempt(a, protocol.AttemptFailed, protocol.FailVerificationFailed, actor, now)
		m.setJob(j, protocol.JobFailed, protocol.FailVerificationFailed, actor, now)
		return protocol.Reply{Code: protocol.CodeVerificationFailed}
	}
	m.setAttempt(a, protocol.AttemptSucceeded, "", actor, now)
	j.outputKey = a.claimed.Key
	j.outputBytes = a.claimed.Bytes
	j.row.OutputSHA256 = a.claimed.SHA256
	j.row.SucceededAttemptID = a.row.ID
	if cancelling {
		// The broken variant: straight past the table, as code that
		// forgot the cancel check and wrote the column would.
		m.writeJob(j, protocol.JobSucceeded, "", actor, now)
	} else {
		m.setJob(j, protocol.JobSucceeded, "", actor, now)
	}
	return protocol.Reply{Code: protocol.CodeCommitOK}
}

// Commit is both transactions back to back: CommitBegin, then CommitFinish
// when CommitBegin answered commit_pending; otherwise CommitBegin's reply.
func (m *ExecutionModel) Commit(now time.Time, deviceID string, c protocol.Commit, outputOK bool) protocol.Reply {
	r := m.CommitBegin(now, deviceID, c, outputOK)
	if r.Code != protocol.CodeCommitPending {
		return r
	}
	return m.CommitFinish(now, c.JobID, c.AttemptID)
}
