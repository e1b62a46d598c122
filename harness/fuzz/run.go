package fuzz

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Factory builds fresh targets for one run of seed. worker is the index of
// the campaign worker asking, so a target can reuse per-worker resources
// (a database) between runs.
type Factory func(ctx context.Context, worker int, seed uint64) ([]Target, error)

// Options tune a run.
type Options struct {
	// Outputs describes attempts' uploads (HashOutput when nil).
	Outputs OutputFunc
	// CompareState compares the targets' projected rows after every step
	// (replies are always compared): the whole projections every
	// FullCompareEvery steps and after the last step, and in between, with
	// targets that are Auditors, the rows the step could have touched
	// (see RowScope and docs/semantics.md, "Campaign comparisons").
	CompareState bool
	// FullCompareEvery is K (0: DefaultFullCompareEvery; 1: the whole
	// projections after every step).
	FullCompareEvery int
	// Trace records, per step, a hash of every target's replies and of the
	// first target's projected rows (RunResult.Trace), for the
	// determinism self-check.
	Trace bool
	// Coverage counts what the run reached (RunResult.Coverage): replies
	// and faults step by step, transitions from the first target's journal
	// at the end.
	Coverage bool
}

// FailureKind classifies why a run failed.
type FailureKind string

// Failure kinds.
const (
	FailureDivergence FailureKind = "divergence"
	FailureViolation  FailureKind = "violation"
	FailureError      FailureKind = "error"
)

// Failure is the first thing that went wrong in a run.
type Failure struct {
	Kind   FailureKind
	Step   int // index into the sequence
	Event  Event
	Target string
	Detail string
}

func (f *Failure) String() string {
	return fmt.Sprintf("%s at step %d (%s) on %s: %s", f.Kind, f.Step, f.Event, f.Target, f.Detail)
}

// RunResult is the outcome of one sequence.
type RunResult struct {
	Steps   int
	Codes   map[string]int
	Failure *Failure
	// Trace holds one hash per step when Options.Trace is set.
	Trace []string
	// Coverage is set when Options.Coverage is.
	Coverage *Coverage
	// Offers are the commit tokens the first target offered, when
	// Options.Coverage is set (a campaign checks them, see TokenRule).
	Offers []Offer
}

// Run plays seq against fresh targets from f, step by step: it applies each
// event to every target, compares their replies (and snapshots, if asked),
// and checks every target's invariants after every step. It stops at the
// first failure.
func Run(ctx context.Context, f Factory, worker int, seq Sequence, opts Options) (RunResult, error) {
	targets, err := f(ctx, worker, seq.Seed)
	if err != nil {
		return RunResult{}, fmt.Errorf("build targets for seed %d: %w", seq.Seed, err)
	}
	defer func() {
		for _, t := range targets {
			_ = t.Close()
		}
	}()
	if opts.Outputs == nil {
		opts.Outputs = HashOutput
	}
	r := &runner{targets: targets, opts: opts, v: newView(seq.Seed)}
	r.live, _ = targets[0].(LiveAttempts)
	res := RunResult{Codes: map[string]int{}}
	if opts.Coverage {
		cov := NewCoverage()
		res.Coverage = &cov
	}
	r.play(ctx, seq, &res)
	if res.Coverage != nil {
		if err := transitionsOf(ctx, targets[0], res.Coverage); err != nil {
			return res, err
		}
	}
	return res, nil
}

// play runs seq's steps into res until the first failure.
func (r *runner) play(ctx context.Context, seq Sequence, res *RunResult) {
	opts := r.opts
	for i, ev := range seq.Events {
		res.Steps++
		r.v.aim(r.live)
		if ev.Op == OpBoundary {
			var err error
			if r.advance, r.landed, err = r.resolveBoundary(ctx, ev); err != nil {
				res.Failure = &Failure{Kind: FailureError, Step: i, Event: ev, Target: r.targets[0].Name(), Detail: err.Error()}
				return
			}
		}
		if res.Coverage != nil {
			r.countFaults(ev, res.Coverage)
		}
		replies, fail := r.step(ctx, ev)
		if fail == nil {
			for _, c := range replies {
				res.Codes[c]++
			}
			if res.Coverage != nil {
				r.countReplies(res.Coverage)
				res.Offers = r.offers(i, res.Offers)
			}
			fail = r.check(ctx, i, i == len(seq.Events)-1)
		}
		if fail == nil && opts.Trace {
			h, err := r.traceHash(ctx, i)
			if err != nil {
				fail = &Failure{Kind: FailureError, Target: r.targets[0].Name(), Detail: "trace: " + err.Error()}
			}
			res.Trace = append(res.Trace, h)
		}
		if fail != nil {
			fail.Step, fail.Event = i, ev
			res.Failure = fail
			return
		}
	}
}

// traceHash hashes step i's replies on every target (every compared field,
// tokens included) and the first target's projected rows.
func (r *runner) traceHash(ctx context.Context, i int) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "step %d\n", i)
	for _, o := range r.last {
		if o.sweep != nil {
			fmt.Fprintf(h, "sweep %+v\n", *o.sweep)
		}
		for _, rep := range o.replies {
			fmt.Fprintf(h, "%s %s %s\n", FormatReply(rep), rep.CommitToken, rep.LeaseExpiresAt.UTC().Format(time.RFC3339Nano))
		}
	}
	snap, err := r.targets[0].Snapshot(ctx)
	if err != nil {
		return "", err
	}
	rows, err := json.Marshal(snap)
	if err != nil {
		return "", err
	}
	h.Write(rows)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

type runner struct {
	targets []Target
	opts    Options
	v       *view
	// live is the first target, if it can say which attempt is live.
	live LiveAttempts
	// last holds every target's outcome of the latest step.
	last []outcome
	// advance and landed are the current boundary tick's resolution: the
	// tick it takes and its coverage key ("" when it fell back).
	advance time.Duration
	landed  string
	// seen is the first target's projection at the previous check.
	seen touched
}

// outcome is one target's answer to a step: replies (a commit has two) or a
// sweep result.
type outcome struct {
	replies []protocol.Reply
	sweep   *protocol.SweepResult
}

func (r *runner) step(ctx context.Context, ev Event) ([]string, *Failure) {
	r.last = nil
	switch ev.Op {
	case OpTick:
		r.v.now = r.v.now.Add(ev.Advance)
		return []string{"tick"}, nil
	case OpBoundary:
		r.v.now = r.v.now.Add(r.advance)
		return []string{"tick"}, nil
	}
	outs := make([]outcome, len(r.targets))
	r.last = outs
	for i, t := range r.targets {
		o, err := r.apply(ctx, t, ev)
		if err != nil {
			return nil, &Failure{Kind: FailureError, Target: t.Name(), Detail: err.Error()}
		}
		outs[i] = o
	}
	for i := 1; i < len(outs); i++ {
		if d := diffOutcome(outs[0], outs[i]); d != "" {
			return nil, &Failure{Kind: FailureDivergence, Target: r.targets[0].Name() + " vs " + r.targets[i].Name(), Detail: d}
		}
	}
	buyer, device := r.actors(ev)
	if ev.Op == OpProgress {
		r.v.learnPhase(outs[0].replies[0], r.v.nextPhase(ev))
	}
	var codes []string
	for _, rep := range outs[0].replies {
		r.v.learn(rep, buyer, device)
		codes = append(codes, string(rep.Code))
	}
	if outs[0].sweep != nil {
		codes = append(codes, "sweep")
	}
	return codes, nil
}

// offers appends the commit tokens the latest step's lease offers carried
// (the first target's; the others offered the same).
func (r *runner) offers(step int, to []Offer) []Offer {
	if len(r.last) == 0 {
		return to
	}
	for _, rep := range r.last[0].replies {
		if rep.Code == protocol.CodeLeaseOffer {
			to = append(to, Offer{Step: step, Token: rep.CommitToken})
		}
	}
	return to
}

// countReplies adds the latest step's replies (of the first target; the
// others gave the same) to c.
func (r *runner) countReplies(c *Coverage) {
	if len(r.last) == 0 {
		return
	}
	for _, rep := range r.last[0].replies {
		c.Replies[replyKey(rep)]++
	}
}

func (r *runner) actors(ev Event) (buyer, device string) {
	if ev.Op == OpCreate {
		buyer = WorldBuyers[ev.Buyer%len(WorldBuyers)].ID
	}
	if ev.Op == OpLease {
		device = WorldDevices[ev.Device%len(WorldDevices)].ID
	}
	return buyer, device
}

// check checks every target's invariants after step, and with
// CompareState compares their projections: whole after every Kth step and
// the last one, else the rows the step could have touched on the targets
// that are Auditors.
func (r *runner) check(ctx context.Context, step int, last bool) *Failure {
	compare := r.opts.CompareState && len(r.targets) > 1
	every := r.opts.FullCompareEvery
	if every == 0 {
		every = DefaultFullCompareEvery
	}
	var first protocol.Snapshot
	var scope *RowScope
	for i, t := range r.targets {
		vs, snap, unchanged, err := r.audit(ctx, t, compare, scope)
		if err != nil {
			return &Failure{Kind: FailureError, Target: t.Name(), Detail: "check: " + err.Error()}
		}
		if len(vs) > 0 {
			return &Failure{Kind: FailureViolation, Target: t.Name(), Detail: fmt.Sprint(vs)}
		}
		if !compare {
			continue
		}
		if unchanged {
			// Neither side changed since the previous check, whose
			// comparison passed (RowScope.Changed).
			if scope == nil || scope.Whole || scope.Changed {
				return &Failure{Kind: FailureError, Target: t.Name(), Detail: "check: an audit answered unchanged to a scope that needs a projection"}
			}
			continue
		}
		if i == 0 {
			first = snap
			scope = r.seen.scope(snap, r.last)
			scope.Whole = last || (step+1)%every == 0
			continue
		}
		want := first
		if _, ok := t.(Auditor); ok && !scope.Whole {
			want = scope.restrict(first, snap)
		}
		d := DiffSnapshots(want, snap)
		if d != "" && !scope.Whole {
			// The scoped rows differ, so the whole projections do; report
			// those, whose first difference does not depend on how many
			// rows beyond the step's the scope happened to take in.
			whole, err := r.wholeDiff(ctx, t, first)
			if err != nil {
				return &Failure{Kind: FailureError, Target: t.Name(), Detail: "snapshot: " + err.Error()}
			}
			if whole != "" {
				d = whole
			}
		}
		if d != "" {
			return &Failure{Kind: FailureDivergence, Target: r.targets[0].Name() + " vs " + t.Name(), Detail: "state: " + d}
		}
	}
	return nil
}

// wholeDiff compares t's whole projection with first's.
func (r *runner) wholeDiff(ctx context.Context, t Target, first protocol.Snapshot) (string, error) {
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return "", err
	}
	return DiffSnapshots(first, snap), nil
}

// audit is t's invariant lines and, when compare is set, its projection:
// scope's part of it from an Auditor given a scope, else the whole.
func (r *runner) audit(ctx context.Context, t Target, compare bool, scope *RowScope) ([]string, protocol.Snapshot, bool, error) {
	if a, ok := t.(Auditor); ok && compare {
		return a.Audit(ctx, scope)
	}
	vs, err := t.CheckInvariants(ctx)
	if err != nil || !compare {
		return vs, protocol.Snapshot{}, false, err
	}
	snap, err := t.Snapshot(ctx)
	return vs, snap, false, err
}

func (r *runner) apply(ctx context.Context, t Target, ev Event) (outcome, error) {
	now := r.v.now
	one := func(rep protocol.Reply, err error) (outcome, error) {
		return outcome{replies: []protocol.Reply{rep}}, err
	}
	switch ev.Op {
	case OpCreate:
		return one(t.CreateJob(ctx, now, r.v.createRequest(ev)))
	case OpLease:
		return one(t.Lease(ctx, now, WorldDevices[ev.Device%len(WorldDevices)].ID))
	case OpProgress:
		f := r.v.fence(ev)
		return one(t.Progress(ctx, now, f.device, protocol.Progress{Type: protocol.TypeProgress,
			JobID: f.jobID, AttemptID: f.attemptID, LeaseEpoch: f.epoch, Phase: r.v.nextPhase(ev)}))
	case OpCommit, OpCommitBegin:
		return r.commit(ctx, t, ev)
	case OpCommitFinish:
		f := r.v.fence(ev)
		return one(t.CommitFinish(ctx, now, f.jobID, f.attemptID))
	case OpFail:
		f := r.v.fence(ev)
		return one(t.Fail(ctx, now, f.device, protocol.Fail{Type: protocol.TypeFail, JobID: f.jobID,
			AttemptID: f.attemptID, LeaseEpoch: f.epoch, CommitToken: f.token, FailureCode: ev.Code}))
	case OpWithdraw:
		f := r.v.fence(ev)
		return one(t.Withdraw(ctx, now, f.device, protocol.Withdrawal{JobID: f.jobID, AttemptID: f.attemptID,
			LeaseEpoch: f.epoch, CommitToken: f.token}))
	case OpCancel:
		jobID, buyer := r.v.junkID(), WorldBuyers[0].ID
		if j := r.v.job(ev.Job); j != nil {
			jobID, buyer = j.id, j.buyer
		}
		if ev.Buyer >= 0 {
			buyer = WorldBuyers[ev.Buyer%len(WorldBuyers)].ID
		}
		return one(t.Cancel(ctx, now, buyer, jobID))
	case OpUpload:
		f := r.v.fence(ev)
		return one(t.Upload(ctx, now, f.jobID, f.attemptID))
	case OpPause:
		return one(t.PauseService(ctx, now, ev.Service))
	case OpResume:
		return one(t.ResumeService(ctx, now, ev.Service))
	case OpSweep:
		res, err := t.Sweep(ctx, now)
		return outcome{sweep: &res}, err
	}
	return outcome{}, fmt.Errorf("unknown op %v", ev.Op)
}

// commit runs transaction 1 and, for a whole commit that was accepted,
// verification and transaction 2 in the same step.
func (r *runner) commit(ctx context.Context, t Target, ev Event) (outcome, error) {
	now := r.v.now
	f := r.v.fence(ev)
	out := r.opts.Outputs(f.jobID, f.attemptID)
	if !ev.OutputOK {
		out.SHA256 = corrupt(out.SHA256)
	}
	c := protocol.Commit{Type: protocol.TypeCommit, JobID: f.jobID, AttemptID: f.attemptID, LeaseEpoch: f.epoch,
		CommitToken: f.token, Output: out}
	begin, err := t.CommitBegin(ctx, now, f.device, c, ev.OutputOK)
	o := outcome{replies: []protocol.Reply{begin}}
	if err != nil || ev.Op == OpCommitBegin || begin.Code != protocol.CodeCommitPending {
		return o, err
	}
	finish, err := t.CommitFinish(ctx, now, f.jobID, f.attemptID)
	o.replies = append(o.replies, finish)
	return o, err
}

// corrupt flips the last hex digit, so a claimed sha256 no longer matches.
func corrupt(sha string) string {
	if sha == "" {
		return sha
	}
	last := byte('0')
	if sha[len(sha)-1] == '0' {
		last = '1'
	}
	return sha[:len(sha)-1] + string(last)
}

func diffOutcome(a, b outcome) string {
	if (a.sweep == nil) != (b.sweep == nil) || len(a.replies) != len(b.replies) {
		return fmt.Sprintf("replies %s != %s", a, b)
	}
	if a.sweep != nil && *a.sweep != *b.sweep {
		return fmt.Sprintf("sweep %+v != %+v", *a.sweep, *b.sweep)
	}
	for i := range a.replies {
		x, y := normalReply(a.replies[i]), normalReply(b.replies[i])
		if x != y {
			return fmt.Sprintf("reply %s != %s", FormatReply(x), FormatReply(y))
		}
	}
	return ""
}

func (o outcome) String() string {
	if o.sweep != nil {
		return fmt.Sprintf("sweep%+v", *o.sweep)
	}
	s := ""
	for _, r := range o.replies {
		s += string(r.Code) + " "
	}
	return "[" + s + "]"
}

// FormatReply renders the compared fields of r that are set, e.g.
// `attempt_not_committable status=leased`.
func FormatReply(r protocol.Reply) string {
	var b strings.Builder
	b.WriteString(string(r.Code))
	add := func(k string, v any, set bool) {
		if set {
			fmt.Fprintf(&b, " %s=%v", k, v)
		}
	}
	add("reason", r.Reason, r.Reason != "")
	add("field", r.Field, r.Field != "")
	add("status", r.Status, r.Status != "")
	add("job", r.JobID, r.JobID != "")
	add("attempt", r.AttemptID, r.AttemptID != "")
	add("number", r.AttemptNumber, r.AttemptNumber != 0)
	add("epoch", r.LeaseEpoch, r.LeaseEpoch != 0)
	add("token", "(set)", r.CommitToken != "")
	add("expires", r.LeaseExpiresAt.Format(time.RFC3339Nano), !r.LeaseExpiresAt.IsZero())
	add("requeued", r.Requeued, r.Requeued)
	add("existing", r.Existing, r.Existing)
	return b.String()
}

// normalReply drops what is not compared (Message) and puts times in UTC.
func normalReply(r protocol.Reply) protocol.Reply {
	r.Message = ""
	r.LeaseExpiresAt = normalTime(r.LeaseExpiresAt)
	return r
}

func normalTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Round(time.Microsecond)
}
