package agent

import (
	"github.com/rendermac/rendermac/protocol"
)

// dispatch handles one decoded gateway frame.
func (a *Agent) dispatch(msg any) {
	switch m := msg.(type) {
	case *protocol.LeaseOffer:
		a.accept(m)
	case *protocol.ProgressOK:
		a.log.Debug("progress_ok", "job_id", m.JobID, "attempt_id", m.AttemptID, "lease_expires_at", m.LeaseExpiresAt)
	case *protocol.LeaseConflict:
		a.onConflict(m)
	case *protocol.Cancel:
		a.onCancel(m)
	case *protocol.Drain:
		a.log.Info("gateway: an operator drained this device")
		a.Drain()
	case *protocol.CommitOK:
		a.onResult(protocol.TypeCommitOK, m.JobID, m.AttemptID, "")
	case *protocol.CommitRejected:
		a.onResult(protocol.TypeCommitRejected, m.JobID, m.AttemptID, string(m.Code), "message", m.Message)
	case *protocol.FailOK:
		a.onResult(protocol.TypeFailOK, m.JobID, m.AttemptID, "", "requeued", m.Requeued)
	case *protocol.FailRejected:
		a.onResult(protocol.TypeFailRejected, m.JobID, m.AttemptID, string(m.Code))
	case *protocol.ErrorMessage:
		a.log.Warn("gateway error", "code", m.Code, "message", m.Message)
	case *protocol.Welcome:
		a.log.Warn("ignoring a second welcome")
	}
}

// onConflict handles a refused progress. The result of a pending commit or
// fail decides such an attempt, so the conflict is only logged. Otherwise:
// job_cancelling is a cancel (fail buyer_cancelled finalizes the
// cancellation at once instead of leaving it to the sweeper); a
// phase_regression cannot come from this agent's monotonic phases and is
// logged; every other reason means the lease is gone, so the work stops and
// the slot is free with nothing sent.
func (a *Agent) onConflict(m *protocol.LeaseConflict) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at := a.held(m.Type, m.JobID, m.AttemptID)
	if at == nil {
		return
	}
	attrs := append(at.logAttrs(), "reason", m.Reason)
	switch {
	case at.final != nil:
		a.log.Info("lease_conflict while a final frame is pending; awaiting its result", attrs...)
	case m.Reason == protocol.ReasonJobCancelling:
		a.log.Warn("lease_conflict: job cancelling; stopping the attempt", attrs...)
		at.cancel(errBuyerCancelled)
	case m.Reason == protocol.ReasonPhaseRegression:
		a.log.Warn("lease_conflict: phase regression reported; continuing", attrs...)
	case a.v.commitAfterConflict():
		a.log.Warn("lease_conflict: attempt gone; (variant) rendering on", attrs...)
		at.conflicted = true
	default:
		a.log.Warn("lease_conflict: attempt gone; stopping it without commit", attrs...)
		a.endLocked(at, errLeaseLost)
	}
}

// onCancel stops a running attempt; its pipeline then sends fail
// buyer_cancelled. A pending commit or fail already speaks for it.
func (a *Agent) onCancel(m *protocol.Cancel) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at := a.held(m.Type, m.JobID, m.AttemptID)
	if at == nil {
		return
	}
	if at.final != nil {
		a.log.Info("cancel while a final frame is pending; awaiting its result", at.logAttrs()...)
		return
	}
	a.log.Info("cancel: stopping the attempt", at.logAttrs()...)
	at.cancel(errBuyerCancelled)
}

// onResult ends an attempt when the gateway answers its final frame: only
// then is the slot free, because only then has the deciding transaction
// committed. A result that answers no pending frame of that kind is logged
// and ignored, so a stray frame cannot free a slot that is still working.
func (a *Agent) onResult(typ, jobID, attemptID, code string, extra ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at := a.held(typ, jobID, attemptID)
	if at == nil {
		return
	}
	isCommitResult := typ == protocol.TypeCommitOK || typ == protocol.TypeCommitRejected
	if at.final == nil || at.committing() != isCommitResult {
		a.log.Warn("result answers no pending frame; ignoring it", append(at.logAttrs(), "type", typ)...)
		return
	}
	attrs := append(at.logAttrs(), "type", typ)
	if code != "" {
		attrs = append(attrs, "code", code)
	}
	attrs = append(attrs, extra...)
	if typ == protocol.TypeCommitOK || typ == protocol.TypeFailOK {
		a.log.Info("attempt over", attrs...)
	} else {
		a.log.Warn("attempt over: final frame rejected", attrs...)
	}
	a.endLocked(at, errAttemptOver)
}
