package agent

import (
	"context"
	"fmt"

	"github.com/rendermac/rendermac/protocol"
)

// This file holds every change to the attempt table; each takes Agent.mu.

// attach makes s the current session and marks everything it must re-send.
// It refuses once shutdown has closed the door on new sessions.
func (a *Agent) attach(s *session, reportedFree int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping {
		return false
	}
	a.sess = s
	a.slotsSent = reportedFree
	for _, at := range a.attempts {
		at.resetForSession()
	}
	signal(a.wake)
	return true
}

func (a *Agent) detach(s *session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sess == s {
		a.sess = nil
	}
}

// collect returns the frames due on s and marks them sent; ok is false once
// s is no longer the current session.
func (a *Agent) collect(s *session) (frames []any, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sess != s {
		return nil, false
	}
	for _, at := range sortedAttempts(a.attempts) {
		frames = append(frames, at.drainFrames()...)
	}
	if free := a.slotsFreeLocked(); free != a.slotsSent {
		frames = append(frames, &protocol.Slots{Type: protocol.TypeSlots, SlotsFree: free})
		a.slotsSent = free
	}
	return frames, true
}

// heartbeat queues the current phase of every attempt that still holds a
// lease phase and has nothing else due, which renews its lease.
func (a *Agent) heartbeat(s *session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sess != s {
		return
	}
	a.checkDiskLocked()
	for _, at := range a.attempts {
		if at.final == nil && at.ctx.Err() == nil && at.phase.LeasePhase() && len(at.unsent) == 0 {
			at.unsent = append(at.unsent, at.phase)
		}
	}
	signal(a.wake)
}

// accept takes a lease offer into a slot and starts its pipeline, or refuses
// it at once with a fail when there is no slot or the agent is draining or
// stopping.
func (a *Agent) accept(o *protocol.LeaseOffer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, dup := a.attempts[o.AttemptID]; dup {
		a.log.Warn("ignoring a second offer for an attempt already held", "job_id", o.JobID, "attempt_id", o.AttemptID)
		return
	}
	ctx, cancel := context.WithCancelCause(a.jobsCtx)
	at := &attempt{offer: *o, token: o.CommitToken, ctx: ctx, cancel: cancel, phase: protocol.AttemptLeased}
	if a.v.reuseCommitToken() {
		if a.keptToken == "" {
			a.keptToken = o.CommitToken
		}
		at.token = a.keptToken
	}
	at.offer.CommitToken = ""
	o.CommitToken = ""
	a.attempts[at.id()] = at
	a.log.Info("lease offer", append(at.logAttrs(), "attempt_number", o.AttemptNumber, "lease_epoch", o.LeaseEpoch)...)
	free := a.checkDiskLocked()
	switch {
	case a.draining && a.hardStop:
		at.final = at.frame(&decision{code: protocol.FailProviderOffline, message: "agent is shutting down"})
	case a.draining:
		a.log.Info("offer while draining; refusing it", at.logAttrs()...)
		at.final = at.frame(&decision{code: protocol.FailNoCapacity, message: "agent is draining"})
	case len(a.attempts) > a.cfg.Slots:
		a.log.Warn("offer beyond free slots; refusing it", at.logAttrs()...)
		at.final = at.frame(&decision{code: protocol.FailNoCapacity, message: "no free slot"})
	case a.lowDisk:
		a.log.Warn("offer while the work dir is short of space; refusing it", append(at.logAttrs(), "free_bytes", free)...)
		at.final = at.frame(&decision{code: a.fullDiskCode(),
			message: fmt.Sprintf("work dir has %d bytes free, below the minimum %d", free, a.cfg.MinFreeBytes)})
	default:
		at.spawned = true
		a.jobs.Add(1)
		go a.runAttempt(at)
	}
	signal(a.wake)
}

// setPhase records a lease phase the gateway must hear.
func (a *Agent) setPhase(at *attempt, phase protocol.AttemptStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.attempts[at.id()] != at || at.final != nil {
		return
	}
	at.phase = phase
	at.unsent = append(at.unsent, phase)
	signal(a.wake)
}

// finish records the pipeline's decision as the attempt's final frame. A
// nil decision (lease lost) sends nothing.
func (a *Agent) finish(at *attempt, d *decision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.attempts[at.id()] != at || at.final != nil {
		return
	}
	if d == nil {
		a.endLocked(at, errLeaseLost)
		return
	}
	// Phases already queued stay ahead of the final frame: each transition
	// the attempt made is reported, and a commit needs its uploading first.
	at.final = at.frame(d)
	signal(a.wake)
}

// endLocked removes an attempt: its slot is free and its token forgotten.
func (a *Agent) endLocked(at *attempt, cause error) {
	delete(a.attempts, at.id())
	at.forget(cause)
	signal(a.wake)
	signal(a.removed)
	a.checkDrainedLocked()
}

// held returns the attempt the gateway names, or nil (logged) when this
// device does not hold it.
func (a *Agent) held(typ, jobID, attemptID string) *attempt {
	at := a.attempts[attemptID]
	if at == nil || at.offer.JobID != jobID {
		a.log.Warn("gateway frame for an attempt not held", "type", typ, "job_id", jobID, "attempt_id", attemptID)
		return nil
	}
	return at
}
