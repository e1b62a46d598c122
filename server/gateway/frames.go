package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/coder/websocket"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/faultpoint"
	"github.com/rendermac/rendermac/server/fencing"
)

// onHello describes the device from its hello, welcomes it, supersedes the
// device's older sessions, tells it about attempts it holds whose job is
// being cancelled (notices it may have missed while away), and asks for
// work. welcomed is set only after welcome is written, so no offer can
// overtake it.
func (s *session) onHello(m *protocol.Hello) {
	at := s.g.cfg.Clock.Now()
	ok, drain, err := s.g.describeDevice(s.g.ctx, s.deviceID, m)
	if err != nil {
		s.log.Error("describe device from hello", "err", err)
		_ = s.conn.Close(websocket.StatusInternalError, "internal error")
		return
	}
	if !ok {
		_ = s.conn.Close(websocket.StatusPolicyViolation, "device revoked")
		return
	}
	s.touched(at) // describeDevice heartbeat the device
	s.mu.Lock()
	s.services = uniq(m.Services)
	s.slotsTotal = m.SlotsTotal
	s.slotsFree = m.SlotsFree
	s.mu.Unlock()
	welcome := &protocol.Welcome{Type: protocol.TypeWelcome, DeviceID: s.deviceID,
		LeaseTTLMs: s.g.cfg.LeaseTTL.Milliseconds(), HeartbeatMs: s.g.cfg.Heartbeat.Milliseconds()}
	if !s.write(welcome) {
		return
	}
	s.mu.Lock()
	// A drain waiting for this device closes the session to offers before
	// any can be made; its frame follows the cancels below.
	s.deviceDrained = s.deviceDrained || drain
	s.welcomed = true
	s.mu.Unlock()
	s.log.Info("session welcomed", "agent_version", m.AgentVersion, "slots_total", m.SlotsTotal, "slots_free", m.SlotsFree)
	for _, old := range s.g.register(s) {
		s.spawn(func() { old.drain(websocket.StatusGoingAway, "superseded by a newer session of this device") })
	}
	notices, err := s.g.pendingCancels(s.g.ctx, []string{s.deviceID})
	if err != nil {
		s.log.Warn("look up pending cancels", "err", err)
	}
	for _, n := range notices {
		s.write(&protocol.Cancel{Type: protocol.TypeCancel, JobID: n.JobID, AttemptID: n.AttemptID})
	}
	if drain {
		// An operator drained the device while no session of it was here.
		s.drainDevice()
	}
	s.wakeOffer()
}

// onSlots takes the agent's report of free slots, less the offers it
// cannot have seen yet.
func (s *session) onSlots(m *protocol.Slots) {
	s.touch()
	s.reportSlots(m.SlotsFree)
	s.wakeOffer()
}

// stopOffers counts no slot of the session free, less the claims in
// flight (which give their slot back if they lease nothing), as a report
// of no free slot would.
func (s *session) stopOffers() { s.reportSlots(0) }

// reportSlots sets the session's free slots from a report, less the claims
// in flight, which the device cannot have seen. The count may go below
// zero: a claim that ends without an offer gives its slot back (unclaim),
// and a count clamped at zero here would then say one slot free that the
// report said was taken (a stopping device was offered a requeued job
// that way, and the offer was withdrawn on its closed session).
func (s *session) reportSlots(free int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slotsFree = min(max(0, free), s.slotsTotal) - s.offering
}

// onProgress renews a lease through the service layer, which heartbeats
// the device in the same transaction when it accepts; a lease_conflict is a
// rejection and heartbeats nothing (see touch). An infrastructure error gets
// no reply: the agent's next heartbeat asks again.
func (s *session) onProgress(m *protocol.Progress) {
	if s.g.v.sessionFenced() { // broken on purpose: the connection is not the fence
		if on, _ := s.g.offeredOn.Load(m.AttemptID); on != s {
			s.write(&protocol.LeaseConflict{Type: protocol.TypeLeaseConflict, JobID: m.JobID, AttemptID: m.AttemptID,
				Reason: protocol.ReasonIdentityMismatch})
			return
		}
	}
	at := s.g.cfg.Clock.Now()
	r, err := s.g.svc.Progress(s.g.ctx, s.g.now(), s.deviceID, *m)
	if err != nil {
		s.log.Warn("progress", "job_id", m.JobID, "attempt_id", m.AttemptID, "err", err)
		if s.g.v.ackProgressOnError() { // broken on purpose: acks an undecided renewal
			s.write(&protocol.ProgressOK{Type: protocol.TypeProgressOK, JobID: m.JobID, AttemptID: m.AttemptID})
		}
		return
	}
	switch r.Code {
	case protocol.CodeProgressOK:
		s.touched(at) // accepted progress heartbeats in its transaction
		s.write(&protocol.ProgressOK{Type: protocol.TypeProgressOK, JobID: r.JobID, AttemptID: r.AttemptID,
			LeaseExpiresAt: r.LeaseExpiresAt})
	case protocol.CodeLeaseConflict:
		s.touchIfRejectedVariant()
		s.g.m.Conflicts.WithLabelValues(string(r.Reason)).Inc()
		s.write(&protocol.LeaseConflict{Type: protocol.TypeLeaseConflict, JobID: m.JobID, AttemptID: m.AttemptID,
			Reason: r.Reason})
	default:
		s.log.Error("progress: unexpected reply", "code", r.Code)
	}
}

// onCommit runs the whole commit (transaction 1, verification,
// transaction 2) and answers with its decision; commit_pending never
// reaches the wire. The slot is released only after the result is written,
// and only when this commit ended a live attempt.
func (s *session) onCommit(m *protocol.Commit) {
	r, err := s.retry(func(ctx context.Context) (protocol.Reply, error) {
		return s.g.svc.Commit(ctx, s.g.now(), s.deviceID, *m)
	})
	if err != nil {
		s.finalFailed("commit", m.JobID, m.AttemptID, err)
		return
	}
	var reply any
	switch r.Code {
	case protocol.CodeCommitOK:
		reply = &protocol.CommitOK{Type: protocol.TypeCommitOK, JobID: m.JobID, AttemptID: m.AttemptID}
	case protocol.CodeCommitConflict, protocol.CodeAttemptNotCommittable, protocol.CodeLeaseExpired,
		protocol.CodeJobCancelled, protocol.CodeVerificationFailed:
		reply = &protocol.CommitRejected{Type: protocol.TypeCommitRejected, JobID: m.JobID, AttemptID: m.AttemptID,
			Code: r.Code, Message: commitMessage(r)}
	default:
		s.finalFailed("commit", m.JobID, m.AttemptID, errors.New("unexpected reply "+string(r.Code)))
		return
	}
	if !endsAttempt(r.Code) {
		s.touchIfRejectedVariant()
	}
	s.g.m.Commits.WithLabelValues(string(r.Code)).Inc()
	s.log.Info("commit", "job_id", m.JobID, "attempt_id", m.AttemptID, "code", r.Code)
	if s.g.v.releaseBeforeReply() && endsAttempt(r.Code) { // broken on purpose
		s.release()
		s.write(reply)
		return
	}
	if s.write(reply) && endsAttempt(r.Code) {
		s.release()
	}
}

// onFail gives an attempt up through the service layer, which decides
// requeue. A requeue is announced so idle devices anywhere hear of it.
func (s *session) onFail(m *protocol.Fail) {
	r, err := s.retry(func(ctx context.Context) (protocol.Reply, error) {
		return s.g.svc.Fail(ctx, s.g.now(), s.deviceID, *m)
	})
	if err != nil {
		s.finalFailed("fail", m.JobID, m.AttemptID, err)
		return
	}
	var reply any
	switch r.Code {
	case protocol.CodeFailOK:
		reply = &protocol.FailOK{Type: protocol.TypeFailOK, JobID: m.JobID, AttemptID: m.AttemptID, Requeued: r.Requeued}
	case protocol.CodeFailConflict, protocol.CodeBadFailureCode:
		reply = &protocol.FailRejected{Type: protocol.TypeFailRejected, JobID: m.JobID, AttemptID: m.AttemptID, Code: r.Code}
	default:
		s.finalFailed("fail", m.JobID, m.AttemptID, errors.New("unexpected reply "+string(r.Code)))
		return
	}
	if r.Code != protocol.CodeFailOK {
		s.touchIfRejectedVariant()
	}
	s.g.m.Fails.WithLabelValues(failLabel(m.FailureCode), string(r.Code)).Inc()
	s.log.Info("fail", "job_id", m.JobID, "attempt_id", m.AttemptID, "failure_code", m.FailureCode, "code", r.Code,
		"requeued", r.Requeued)
	if !s.write(reply) {
		return
	}
	switch {
	case r.Code != protocol.CodeFailOK:
	case m.FailureCode == protocol.FailProviderOffline:
		// The device is stopping: no slot of it is free in this session's
		// view until its next slots report (or hello) says otherwise, not
		// only this attempt's. A count one too high (a report read late)
		// would otherwise offer it the job just requeued, on a session
		// about to close.
		s.stopOffers()
		s.log.Info("fail "+string(m.FailureCode)+": no offer until the device reports free slots", "job_id", m.JobID,
			"attempt_id", m.AttemptID)
	case m.FailureCode == protocol.FailNoCapacity:
		// The device refused for want of room (a full disk, no slot): the
		// slot stays taken in this session's view until its next slots
		// report says otherwise, or every offer would come straight back
		// refused and burn the job's attempts in a few milliseconds.
		s.log.Info("fail "+string(m.FailureCode)+": no offer until the device reports free slots", "job_id", m.JobID,
			"attempt_id", m.AttemptID)
	default:
		s.release()
	}
	if r.Requeued {
		s.g.jobsAvailable("")
	}
}

// endsAttempt reports whether a commit reply is the decision that ended a
// live attempt (so its slot is free). The rejections before any mutation
// (conflict, not committable, expired) leave the device's slots as they were.
func endsAttempt(c protocol.Code) bool {
	switch c {
	case protocol.CodeCommitOK, protocol.CodeJobCancelled, protocol.CodeVerificationFailed:
		return true
	}
	return false
}

func commitMessage(r protocol.Reply) string {
	switch r.Code {
	case protocol.CodeCommitConflict:
		return "job, attempt, device, lease epoch or commit token does not match"
	case protocol.CodeAttemptNotCommittable:
		return "attempt is " + string(r.Status) + ", not uploading"
	case protocol.CodeLeaseExpired:
		return "the lease expired before the commit"
	case protocol.CodeJobCancelled:
		return "the job was cancelled"
	case protocol.CodeVerificationFailed:
		if r.Message != "" {
			return "the output failed verification: " + r.Message
		}
		return "the output failed verification"
	}
	return string(r.Code)
}

// release frees one slot after a result that ended an attempt was written
// (so the deciding transaction has committed) and asks for the next offer.
func (s *session) release() {
	s.g.svc.FaultPoints().Hit(s.g.ctx, faultpoint.GatewayBeforeSlotRelease)
	s.freeSlot()
}

// freeSlot counts one more free slot, up to slots_total, and wakes the
// offerer.
func (s *session) freeSlot() {
	s.mu.Lock()
	if s.slotsFree < s.slotsTotal {
		s.slotsFree++
	}
	s.mu.Unlock()
	s.wakeOffer()
}

// retry re-runs a commit or fail after an infrastructure error; both are
// idempotent under the fence (a repeated commit of a committing attempt
// verifies again). The pause is real time: it waits for real
// infrastructure, whatever clock pins the decisions.
//
// While the database is unavailable (fencing.Unavailable: no host takes
// writes, a read-only or shutting-down server, as in a failover) the
// re-runs go on past finalRetries for up to failoverWait, the pause capped
// at failoverBackoffMax: a final frame is decided on the new primary, not
// answered by closing the session.
func (s *session) retry(op func(context.Context) (protocol.Reply, error)) (protocol.Reply, error) {
	wait := retryBackoff
	var began time.Time
	for try := 0; ; try++ {
		r, err := op(s.g.ctx)
		if err == nil || errors.Is(err, fencing.ErrInternal) || s.g.ctx.Err() != nil {
			return r, err
		}
		if began.IsZero() {
			began = time.Now()
		}
		waiting := fencing.Unavailable(err) && time.Since(began) < failoverWait
		if try >= finalRetries && !waiting {
			return r, err
		}
		if waiting && try >= finalRetries {
			s.log.Warn("database unavailable; waiting for a primary", "err", err, "in", wait)
		} else {
			s.log.Warn("service call failed; retrying", "err", err, "in", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-s.g.ctx.Done():
			t.Stop()
			return r, err
		case <-t.C:
		}
		wait = min(2*wait, failoverBackoffMax)
	}
}

// finalFailed handles a commit or fail that got no decision. There is no
// wire reply for "try again", so the session is closed with 1011: the
// agent reconnects and re-sends the frame whose result it never got.
func (s *session) finalFailed(op, jobID, attemptID string, err error) {
	if s.g.ctx.Err() != nil {
		return
	}
	s.log.Error(op+" got no decision; closing the session so the agent re-sends", "job_id", jobID,
		"attempt_id", attemptID, "err", err)
	_ = s.conn.Close(websocket.StatusInternalError, "internal error; reconnect and re-send")
}

func uniq(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, v := range in {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// failLabel is a device's failure code as a metric label: one of the
// contract's codes, or "invalid", so a device cannot grow the series.
func failLabel(c protocol.FailureCode) string {
	if c.Valid() {
		return string(c)
	}
	return "invalid"
}
