package model

import (
	"fmt"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Lease offers the device the oldest queued job it can run. In one step: the
// device is marked seen (also on no_job), the attempt is inserted leased with
// epoch 1 and a fresh token hash, the job goes queued -> active and the
// device's slot counter goes up. The reply carries the only copy of the
// plaintext token. An attempt id and token are drawn only when an attempt is
// inserted.
func (m *ExecutionModel) Lease(now time.Time, deviceID string) protocol.Reply {
	now = normalize(now)
	d, ok := m.devices[deviceID]
	if !ok || d.status == protocol.DeviceRevoked {
		return protocol.Reply{Code: protocol.CodeNotFound}
	}
	if d.occupied >= d.slotsTotal {
		return protocol.Reply{Code: protocol.CodeNoSlot}
	}
	d.seen(now)
	j := m.pickJob(now, d)
	if j == nil {
		return protocol.Reply{Code: protocol.CodeNoJob}
	}
	a, token := m.insertAttempt(now, j, d)
	m.setJob(j, protocol.JobActive, "", protocol.ActorMatcher, now)
	return protocol.Reply{Code: protocol.CodeLeaseOffer, JobID: j.row.ID, AttemptID: a.row.ID,
		AttemptNumber: a.row.Number, LeaseEpoch: a.row.LeaseEpoch, CommitToken: token,
		LeaseExpiresAt: a.row.LeaseExpiresAt}
}

// pickJob is Lease step 4: the queued job with the smallest (created_at, id)
// whose service the device offers and is not paused, and whose deadline is
// still ahead.
func (m *ExecutionModel) pickJob(now time.Time, d *device) *job {
	for _, j := range m.open {
		if j.row.Status == protocol.JobQueued && j.row.AdmissionDeadline.After(now) && d.offers(j.row.Service) &&
			!m.paused[j.row.Service] {
			return j
		}
	}
	return nil
}

// insertAttempt is Lease step 5 up to the job transition: the attempt row,
// its journal row and the occupied slot. It returns the plaintext token.
func (m *ExecutionModel) insertAttempt(now time.Time, j *job, d *device) (*attempt, string) {
	id := m.ids.NewAttemptID()
	token, hash, err := m.ids.NewCommitToken()
	if err != nil {
		// A broken entropy source: no reply of the contract covers it.
		panic(fmt.Sprintf("sim: draw commit token: %v", err))
	}
	if _, dup := m.attempts[id]; dup {
		panic(fmt.Sprintf("sim: IDSource returned attempt id %s twice", id))
	}
	a := &attempt{
		row: protocol.AttemptRow{ID: id, JobID: j.row.ID, DeviceID: d.id, Number: j.row.AttemptCount + 1,
			Status: protocol.AttemptLeased, LeaseEpoch: 1, LeaseExpiresAt: normalize(now.Add(m.cfg.LeaseTTL)),
			TokenHash: hash},
		job:    j,
		device: d,
	}
	j.attempts = append(j.attempts, a)
	j.row.AttemptCount++
	m.attempts[id] = a
	m.attemptLog = append(m.attemptLog, a)
	m.chk.offered(token)
	d.occupied++
	m.touchDevice(d)
	m.record(kindAttempt, j.row.ID, id, "", string(protocol.AttemptLeased), "", protocol.ActorMatcher, now)
	m.touch(j)
	return a, token
}

// Progress reports a lease phase. The checks run in the documented order and
// the first failing one answers lease_conflict with its reason, mutating
// nothing; otherwise the phase is written (journal only when it changes), the
// lease renewed and the device marked seen.
func (m *ExecutionModel) Progress(now time.Time, deviceID string, p protocol.Progress) protocol.Reply {
	now = normalize(now)
	a := m.attempts[p.AttemptID]
	if a == nil || a.row.JobID != p.JobID || a.row.DeviceID != deviceID || a.row.LeaseEpoch != p.LeaseEpoch {
		return conflict(protocol.ReasonIdentityMismatch)
	}
	if !a.row.Status.LeasePhase() {
		return conflict(protocol.ReasonAttemptTerminal)
	}
	if a.job.row.Status == protocol.JobCancelling {
		return conflict(protocol.ReasonJobCancelling)
	}
	if !a.row.LeaseExpiresAt.After(now) {
		return conflict(protocol.ReasonLeaseExpired)
	}
	// A phase that is not a lease phase ranks 0, so it lands here too and
	// is never written.
	if protocol.PhaseRank(p.Phase) < protocol.PhaseRank(a.row.Status) {
		return conflict(protocol.ReasonPhaseRegression)
	}
	if p.Phase != a.row.Status {
		m.setAttempt(a, p.Phase, "", protocol.ActorDevice, now)
	}
	a.row.LeaseExpiresAt = normalize(now.Add(m.cfg.LeaseTTL))
	m.touch(a.job)
	a.device.seen(now)
	return protocol.Reply{Code: protocol.CodeProgressOK, JobID: a.row.JobID, AttemptID: a.row.ID,
		LeaseExpiresAt: a.row.LeaseExpiresAt}
}

func conflict(r protocol.ConflictReason) protocol.Reply {
	return protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: r}
}
