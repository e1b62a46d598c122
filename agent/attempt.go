package agent

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"

	"github.com/rendermac/rendermac/protocol"
)

// Causes an attempt's context is cancelled with. The pipeline reads the cause
// to decide what the gateway is told: a buyer cancel and a shutdown are
// reported with a fail; a lost lease is not reported at all, because the
// attempt no longer exists for the control plane.
var (
	errBuyerCancelled = errors.New("cancelled by the buyer")
	errShutdown       = errors.New("agent shutting down")
	errLeaseLost      = errors.New("lease lost")
	errAttemptOver    = errors.New("attempt over")
)

// attempt is one lease this device holds. offer has its commit token removed;
// the token lives in token, read and cleared only under Agent.mu, so that it
// exists in exactly one place and disappears when the attempt ends.
type attempt struct {
	offer  protocol.LeaseOffer
	token  string
	ctx    context.Context
	cancel context.CancelCauseFunc
	// spawned says a pipeline goroutine runs for this attempt; an offer
	// refused at once (no slot, shutting down) has none.
	spawned bool

	phase protocol.AttemptStatus
	// unsent are the phases not yet written on the current connection, in
	// order: each transition is reported, and a heartbeat adds the current
	// phase when nothing else is due.
	unsent []protocol.AttemptStatus
	// final is the *protocol.Commit or *protocol.Fail that ends the attempt,
	// nil while it runs; finalSent says it went out on the current connection.
	final     any
	finalSent bool
	// conflicted is set only by the commit_after_conflict variant.
	conflicted bool
}

func (at *attempt) id() string { return at.offer.AttemptID }

func (at *attempt) logAttrs() []any {
	return []any{slog.String("job_id", at.offer.JobID), slog.String("attempt_id", at.offer.AttemptID),
		slog.String("service", at.offer.Service)}
}

// decision is what the pipeline concluded: a failure code with a message, an
// uploaded output to commit, or neither when the lease was lost.
type decision struct {
	code    protocol.FailureCode
	message string
	output  *protocol.Output
}

func failWith(code protocol.FailureCode, err error) *decision {
	return &decision{code: code, message: err.Error()}
}

// frame builds the final frame for d. Called under Agent.mu (it reads token).
func (at *attempt) frame(d *decision) any {
	o := at.offer
	if d.output != nil {
		return &protocol.Commit{Type: protocol.TypeCommit, JobID: o.JobID, AttemptID: o.AttemptID,
			LeaseEpoch: o.LeaseEpoch, CommitToken: at.token, Output: *d.output}
	}
	return &protocol.Fail{Type: protocol.TypeFail, JobID: o.JobID, AttemptID: o.AttemptID, LeaseEpoch: o.LeaseEpoch,
		CommitToken: at.token, FailureCode: d.code, Message: protocol.CleanFailMessage(d.message, at.token)}
}

func (at *attempt) progress(phase protocol.AttemptStatus) *protocol.Progress {
	o := at.offer
	return &protocol.Progress{Type: protocol.TypeProgress, JobID: o.JobID, AttemptID: o.AttemptID,
		LeaseEpoch: o.LeaseEpoch, Phase: phase}
}

// committing reports whether the final frame is a commit, which the gateway
// accepts only after it has seen the uploading phase.
func (at *attempt) committing() bool {
	_, ok := at.final.(*protocol.Commit)
	return ok
}

// resetForSession marks what a new connection must carry for this attempt:
// its current phase (renewing the lease, and putting a commit's uploading
// phase before it) and the final frame again, since its result may have
// been lost with the old connection. A fail needs no phase before it.
func (at *attempt) resetForSession() {
	at.unsent = nil
	at.finalSent = false
	if at.phase.LeasePhase() && (at.final == nil || at.committing()) {
		at.unsent = []protocol.AttemptStatus{at.phase}
	}
}

// drainFrames returns the frames due for this attempt, marking them sent.
func (at *attempt) drainFrames() []any {
	var out []any
	for _, p := range at.unsent {
		out = append(out, at.progress(p))
	}
	at.unsent = nil
	if at.final != nil && !at.finalSent {
		out = append(out, at.final)
		at.finalSent = true
	}
	return out
}

// forget drops the attempt's secrets and stops its work.
func (at *attempt) forget(cause error) {
	at.token = ""
	at.final = nil
	at.unsent = nil
	at.cancel(cause)
}

// sortedAttempts returns the attempts in id order, so frames go out in the
// same order for the same state.
func sortedAttempts(m map[string]*attempt) []*attempt {
	out := make([]*attempt, 0, len(m))
	for _, at := range m {
		out = append(out, at)
	}
	slices.SortFunc(out, func(a, b *attempt) int { return strings.Compare(a.id(), b.id()) })
	return out
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
