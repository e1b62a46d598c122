package targets

import (
	"context"
	"sync"
	"time"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/protocol"
)

// CommitProbe wraps the first target of a run (the model) and remembers
// how its last commit went, so that the full stack can tell which event a
// CommitBegin belongs to. fuzz.Target does not say: the runner calls
// CommitBegin for both a whole commit (OpCommit, followed by CommitFinish
// in the same step when transaction 1 answered commit_pending) and
// transaction 1 alone (OpCommitBegin). The wire can only express the whole
// commit, so the stack must know.
//
// This relies on the runner applying a step to each target in order, the
// whole event at a time (harness/fuzz/run.go step): when the stack's n-th
// CommitBegin runs, the model has seen its n-th CommitBegin and, for an
// OpCommit it accepted, the CommitFinish right after it. (Frames are not
// compared: the runner draws junk identities afresh for every target.) The
// stack checks the count and fails the run when it is off, so a change in
// the runner shows up as an error, not as a silent mis-mapping. The probe
// goes away once faults tells a target the event (for instance an optional
// Target method the runner calls for a whole OpCommit).
type CommitProbe struct {
	fuzz.Target

	mu sync.Mutex
	// begins counts CommitBegin calls; code is the last one's reply, and
	// finished says a CommitFinish followed it directly.
	begins   int
	code     protocol.Code
	finished bool
	last     string // "begin" or "finish": the last commit call
}

// NewCommitProbe wraps t.
func NewCommitProbe(t fuzz.Target) *CommitProbe { return &CommitProbe{Target: t} }

// LiveAttempt implements fuzz.LiveAttempts when the wrapped target does,
// so a three-way run orders jobs and names fault phases like a two-way one.
func (p *CommitProbe) LiveAttempt(jobID string) (protocol.AttemptRow, bool) {
	if l, ok := p.Target.(fuzz.LiveAttempts); ok {
		return l.LiveAttempt(jobID)
	}
	return protocol.AttemptRow{}, false
}

// PausedBlocks implements fuzz.Pauses when the wrapped target does, so the
// three-way campaign's coverage counts the leases and sweeps the pause rule
// decides (without it the coverage gate saw none there, however many ran).
func (p *CommitProbe) PausedBlocks(now time.Time, deviceID string) bool {
	ps, ok := p.Target.(fuzz.Pauses)
	return ok && ps.PausedBlocks(now, deviceID)
}

// PausedExpires implements fuzz.Pauses when the wrapped target does.
func (p *CommitProbe) PausedExpires(now time.Time) bool {
	ps, ok := p.Target.(fuzz.Pauses)
	return ok && ps.PausedExpires(now)
}

// CommitBegin implements fuzz.Target.
func (p *CommitProbe) CommitBegin(ctx context.Context, now time.Time, dev string, c protocol.Commit, ok bool) (protocol.Reply, error) {
	r, err := p.Target.CommitBegin(ctx, now, dev, c, ok)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.begins, p.code, p.finished, p.last = p.begins+1, r.Code, false, "begin"
	return r, err
}

// CommitFinish implements fuzz.Target.
func (p *CommitProbe) CommitFinish(ctx context.Context, now time.Time, job, att string) (protocol.Reply, error) {
	r, err := p.Target.CommitFinish(ctx, now, job, att)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished, p.last = p.last == "begin", "finish"
	return r, err
}

// commitKind is what the probe says about the stack's current CommitBegin.
type commitKind int

const (
	// commitUnknown: the probe is out of step (or absent: then the stack
	// runs transaction 1 on the service layer, correct for either event).
	commitUnknown commitKind = iota
	// commitWhole: OpCommit (the model ran both transactions), or a commit
	// whose transaction 1 the model refused, where OpCommit and
	// OpCommitBegin mean the same single transaction. Either goes over
	// the wire as one commit frame.
	commitWhole
	// commitBeginOnly: OpCommitBegin whose transaction 1 the model
	// accepted; the runner will not ask for transaction 2 in this step.
	commitBeginOnly
)

// kind classifies the stack's n-th CommitBegin of the run.
func (p *CommitProbe) kind(n int) commitKind {
	if p == nil {
		return commitUnknown
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.begins != n:
		return commitUnknown
	case p.code == protocol.CodeCommitPending && !p.finished:
		return commitBeginOnly
	}
	return commitWhole
}
