package linearize

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/rendermac/rendermac/harness/model"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/protocol"
)

// The per-job sequential specification is the real model.ExecutionModel, not a
// re-implementation of its rules. sim's model is a mutable step machine and
// cannot be cloned, so a porcupine state is the trail of the state-changing
// operations applied so far (an immutable list shared between branches of
// the search), and Step rebuilds a fresh one-job model by replaying the
// trail, then applies the new operation and compares the model's reply with
// the recorded one. Ids and tokens are what the service minted: the
// replayed model draws them from a scripted IDSource fed with the recorded
// lease_offer, so a lease is accepted exactly when the model would have
// offered this job, with this attempt number and epoch.
//
// Equal and Hash use the projection of the rebuilt model (the job row, its
// attempt rows, the slot counters, and the verification verdict fixed at
// commit), not the trail: two trails with the same projection answer every future operation
// alike, which is what lets porcupine's cache prune. Operations that leave
// the projection unchanged (every conflict) are not added to the trail, so a
// replay is as long as the job's real transitions, not its history.

// linState is a porcupine state of one job's partition.
type linState struct {
	job   string // bound by the partition's first operation
	clock int64  // the instant, microseconds after World.Now (ticks move it)
	trail *linTrail
	key   string
	// verdict is the outcome verification will have, fixed when an attempt
	// entered committing (0 before). Rows do not show it, and only one
	// attempt of a job can ever be committing: every way out of committing
	// ends the job.
	verdict linVerdict
}

type linVerdict uint8

const (
	linVerdictNone linVerdict = iota
	linVerdictPass
	linVerdictFail
)

// linTrail is one applied state-changing operation, newest first.
type linTrail struct {
	prev *linTrail
	in   Input
	out  Output
}

// linModel is the per-job specification over one world.
type linModel struct {
	world World
	jobs  map[string]Job
	// memo caches step results by (state, operation). Step is a pure
	// function of the state's projection and the operation, and porcupine
	// tries the same operation on the same state many times while it
	// backtracks over the orders of concurrent conflicts, each of which
	// would otherwise cost a replay. Partitions are checked concurrently,
	// hence the lock; the job is part of the key.
	mu   sync.Mutex
	memo map[linStepKey]linStepResult
}

type linStepKey struct {
	job, key string
	verdict  linVerdict
	in       Input
	out      Output
}

type linStepResult struct {
	ok   bool
	next linState
}

// Model is the porcupine model of SPEC section 3 per job, over world.
func Model(world World) porcupine.Model {
	lm := &linModel{world: world, jobs: map[string]Job{}, memo: map[linStepKey]linStepResult{}}
	for _, j := range world.Jobs {
		lm.jobs[j.ID] = j
	}
	return porcupine.Model{
		Partition: linPartition,
		Init:      func() any { return linState{} },
		Step:      lm.step,
		Equal: func(a, b any) bool {
			x, y := a.(linState), b.(linState)
			return x.job == y.job && x.key == y.key && x.verdict == y.verdict && x.clock == y.clock
		},
		Hash: func(s any) uint64 {
			x := s.(linState)
			return linHash(x.key) ^ uint64(x.verdict) ^ uint64(x.clock)*0x9e3779b97f4a7c15
		},
		DescribeOperation: linDescribeOp,
		DescribeState:     lm.describeState,
	}
}

func (lm *linModel) step(state, input, output any) (bool, any) {
	s, in, out := state.(linState), input.(Input), output.(Output)
	if in.Op == Tick {
		// Time only moves forward; a tick changes nothing but the clock.
		if in.Now < s.clock {
			return false, nil
		}
		s.clock = in.Now
		return true, s
	}
	if in.Now != s.clock {
		return false, nil // run at another instant than the state's
	}
	k := linStepKey{job: s.job, key: s.key, verdict: s.verdict, in: in, out: out}
	lm.mu.Lock()
	r, hit := lm.memo[k]
	lm.mu.Unlock()
	if !hit {
		r.ok, r.next = lm.stepOnce(s, in, out)
		lm.mu.Lock()
		lm.memo[k] = r
		lm.mu.Unlock()
	}
	if !r.ok {
		return false, nil
	}
	return true, r.next
}

// stepOnce is the step itself: rebuild, apply, compare, project.
func (lm *linModel) stepOnce(s linState, in Input, out Output) (bool, linState) {
	job := linJobOf(porcupine.Operation{Input: in, Output: out})
	if s.job != "" && s.job != job {
		panic(fmt.Sprintf("linearizability: job %s's partition holds an operation of job %s", s.job, job))
	}
	m, ids := lm.rebuild(job, s.trail)
	if got := lm.apply(m, ids, in, out); got != out {
		return false, linState{}
	}
	key := lm.project(m)
	if key == s.key && (s.job != "" || in.Op == Sweep || in.Op == GetJob) {
		s.job = job
		return true, s
	}
	next := linState{job: job, clock: s.clock, trail: &linTrail{prev: s.trail, in: in, out: out}, key: key, verdict: s.verdict}
	if in.Op == CommitBegin && out.Code == protocol.CodeCommitPending && s.verdict == linVerdictNone {
		// A commit_pending that changed the state is uploading -> committing:
		// the model fixed outputOK (and the attempt-scoped key) here.
		next.verdict = linVerdictFail
		if in.OutputOK && in.Output.Key == protocol.OutputKey(in.JobID, in.AttemptID) {
			next.verdict = linVerdictPass
		}
	}
	return true, next
}

// rebuild returns a fresh one-job model in the state trail leads to. A
// replayed operation must give its recorded reply again: the model is
// deterministic, so anything else is a bug of this file, and panics.
func (lm *linModel) rebuild(job string, trail *linTrail) (*model.ExecutionModel, *linIDs) {
	ids := &linIDs{job: job}
	m := model.New(model.Config{LeaseTTL: lm.world.LeaseTTL, HeartbeatWindow: lm.world.HeartbeatWindow}, ids)
	for _, b := range lm.world.Buyers {
		m.AddBuyer(b.ID, b.BalanceCents)
	}
	for _, d := range lm.world.Devices {
		m.AddDevice(d.ID, d.Services, d.SlotsTotal)
	}
	// A job id the world does not know (a forged one) gets an empty model.
	if spec, ok := lm.jobs[job]; ok {
		if r := m.CreateJob(lm.world.Now, spec.Request); r.Code != protocol.CodeCreated || r.JobID != job {
			panic(fmt.Sprintf("linearizability: model refused job %s: %s", job, r.Code))
		}
	}
	var path []*linTrail
	for t := trail; t != nil; t = t.prev {
		path = append(path, t)
	}
	for i := len(path) - 1; i >= 0; i-- {
		t := path[i]
		if got := lm.apply(m, ids, t.in, t.out); got != t.out {
			panic(fmt.Sprintf("linearizability: replay of %s gave %+v, recorded %+v", linDescribeOp(t.in, t.out), got, t.out))
		}
	}
	return m, ids
}

// apply runs in on the model and projects its reply. For a lease the
// scripted ids are loaded from the recorded offer first.
func (lm *linModel) apply(m *model.ExecutionModel, ids *linIDs, in Input, out Output) Output {
	now := lm.world.Now.Add(time.Duration(in.Now) * time.Microsecond)
	var r protocol.Reply
	switch in.Op {
	case Sweep:
		before := len(m.Snapshot().Journal)
		m.Sweep(now)
		return Output{Code: "swept", JobID: ids.job, Sweep: linModelSweep(m.Snapshot().Journal[before:], ids.job)}
	case Lease:
		if out.Code == protocol.CodeLeaseOffer && linHasAttempt(m, out.AttemptID) {
			// The model would panic on an id drawn twice; a service that
			// offers one attempt id twice is simply not linearizable.
			return Output{Code: "duplicate_attempt_id"}
		}
		ids.attempt, ids.token = out.AttemptID, out.Token
		r = m.Lease(now, in.Device)
	case Progress:
		r = m.Progress(now, in.Device, in.progress())
	case CommitBegin:
		r = m.CommitBegin(now, in.Device, in.commit(), in.OutputOK)
	case CommitFinish:
		r = m.CommitFinish(now, in.JobID, in.AttemptID)
	case Fail:
		r = m.Fail(now, in.Device, in.fail())
	case Cancel:
		r = m.Cancel(now, in.Buyer, in.JobID)
	case GetJob:
		// The buyer's read: the job's status, if it is the buyer's job.
		for _, j := range m.Snapshot().Jobs {
			if j.ID == in.JobID && j.BuyerID == in.Buyer {
				return Output{Code: linJobView, Job: j.Status}
			}
		}
		return Output{Code: protocol.CodeNotFound}
	default:
		panic(fmt.Sprintf("linearizability: unknown op %q", in.Op))
	}
	return linOutputOf(r)
}

// project renders the model's state of the job as a canonical string: the
// job row, every attempt row and the devices' slot counters. With every call
// at one instant nothing else the model holds (journal, last_seen_at) can
// change a later reply.
func (lm *linModel) project(m *model.ExecutionModel) string {
	snap := m.Snapshot()
	var b strings.Builder
	for _, j := range snap.Jobs {
		fmt.Fprintf(&b, "%s %s %s n=%d %s w=%d %s %s;", j.ID, j.Status, j.FailureCode, j.AttemptCount, j.HoldStatus,
			j.Webhooks, j.OutputSHA256, j.SucceededAttemptID)
	}
	for _, a := range snap.Attempts {
		fmt.Fprintf(&b, "%s %s #%d %s e%d x%d %s %s;", a.ID, a.DeviceID, a.Number, a.Status, a.LeaseEpoch,
			a.LeaseExpiresAt.UnixMicro(), a.TokenHash, a.FailureCode)
	}
	for _, d := range snap.Devices {
		if d.LiveAttempts != 0 {
			fmt.Fprintf(&b, "%s live=%d;", d.ID, d.LiveAttempts)
		}
	}
	return b.String()
}

// linModelSweep renders the model's sweeper journal rows of job as a
// partition's sweep effect (linEncodeSweep's part for one job).
func linModelSweep(events []protocol.EventRow, job string) string {
	var eff []string
	for _, e := range events {
		if e.Actor == protocol.ActorSweeper && e.JobID == job {
			eff = append(eff, targets.SweepEffect(e.Kind, e.AttemptID, e.From, e.To, e.Code))
		}
	}
	return linSweepOf(linEncodeSweep(map[string][]string{job: eff}), job)
}

// describeState renders a state for the visualization, e.g.
// `active n=2 | #1 failed(upload_failed)@0002 | #2 uploading@0004`.
func (lm *linModel) describeState(state any) string {
	s := state.(linState)
	if s.job == "" {
		return "queued (initial)"
	}
	m, _ := lm.rebuild(s.job, s.trail)
	snap := m.Snapshot()
	var b strings.Builder
	for _, j := range snap.Jobs {
		fmt.Fprintf(&b, "%s n=%d", j.Status, j.AttemptCount)
		if j.FailureCode != "" {
			fmt.Fprintf(&b, " (%s)", j.FailureCode)
		}
	}
	for _, a := range snap.Attempts {
		fmt.Fprintf(&b, " | #%d %s", a.Number, a.Status)
		if a.FailureCode != "" {
			fmt.Fprintf(&b, "(%s)", a.FailureCode)
		}
		fmt.Fprintf(&b, "@%s", linShort(a.DeviceID))
	}
	return b.String()
}

// linDescribeOp renders an operation without its plaintext token (a
// token's hash prefix stands for it), e.g.
// `commit_begin(@0002 …c0ffee#2 e2 tok=3fa9… [wrong_epoch]) -> commit_conflict`.
func linDescribeOp(input, output any) string {
	in, out := input.(Input), output.(Output)
	var b strings.Builder
	fmt.Fprintf(&b, "%s(", in.Op)
	switch in.Op {
	case Lease:
		fmt.Fprintf(&b, "@%s", linShort(in.Device))
	case Cancel, GetJob:
		fmt.Fprintf(&b, "buyer %s", linShort(in.Buyer))
	default:
		fmt.Fprintf(&b, "@%s a=%s e%d", linShort(in.Device), linShort(in.AttemptID), in.Epoch)
	}
	if in.Phase != "" {
		fmt.Fprintf(&b, " %s", in.Phase)
	}
	if in.Token != "" {
		fmt.Fprintf(&b, " tok=%s", protocol.HashCommitToken(in.Token)[:6])
	}
	if in.FailureCode != "" {
		fmt.Fprintf(&b, " %s", in.FailureCode)
	}
	if in.Op == CommitBegin && !in.OutputOK {
		b.WriteString(" bad-output")
	}
	if in.Label != "" {
		fmt.Fprintf(&b, " [%s]", in.Label)
	}
	fmt.Fprintf(&b, ") -> %s", out.Code)
	switch {
	case out.Reason != "":
		fmt.Fprintf(&b, "/%s", out.Reason)
	case out.Status != "":
		fmt.Fprintf(&b, "/%s", out.Status)
	case out.Code == protocol.CodeLeaseOffer:
		fmt.Fprintf(&b, " a=%s #%d", linShort(out.AttemptID), out.AttemptNumber)
	case out.Requeued:
		b.WriteString(" requeued")
	case out.Job != "":
		fmt.Fprintf(&b, " %s", out.Job)
	}
	return b.String()
}

func linHasAttempt(m *model.ExecutionModel, id string) bool {
	for _, a := range m.Snapshot().Attempts {
		if a.ID == id {
			return true
		}
	}
	return false
}

// linIDs is the replayed model's IDSource: the job's id, and for the lease
// being replayed the attempt id and token the service minted.
type linIDs struct{ job, attempt, token string }

func (s *linIDs) NewJobID() string     { return s.job }
func (s *linIDs) NewAttemptID() string { return s.attempt }
func (s *linIDs) NewCommitToken() (string, string, error) {
	return s.token, protocol.HashCommitToken(s.token), nil
}
