package linearize

// Linearizability of concurrent histories against the model.
//
// Many clients drive a Target (the Postgres service layer, or a
// mutex-guarded model for the checker's own tests) at once; a Recorder
// notes every operation's call and return instants, input and reply. The
// history is then checked with porcupine against the sequential
// specification, model.ExecutionModel, one job at a time.
//
// # Partitioning, and why it is sound
//
// The per-job specification is the model restricted to one job J: a fresh
// model.ExecutionModel with the world's buyers and devices and J as its only
// job (model.go). A history is split by job: every
// progress, commit_begin, commit_finish, fail and cancel goes to the job it
// names (its input's job id, whatever attempt it presents), and a lease goes
// to the job its lease_offer names. Leases that returned no_job or no_slot
// are left out, and so are frames the fence refuses in every state (see
// linFenceRefused).
//
// Every operation of the contract reads and writes at most one job's rows
// (and its attempts); what else it touches is device and buyer state. The
// only cross-job reads are Lease's admission guards: which queued job is
// the oldest, and whether the device has a free slot. Those are the two
// rules the per-job specification relaxes. Lease becomes a nondeterministic
// choice: it may offer any queued job the device can run, or answer no_job.
// This is not a loophole but the contract: Lease picks with FOR UPDATE SKIP
// LOCKED, so a queued job whose row another transaction holds (a cancel, or
// a stale commit presenting that job's id) is legitimately skipped, and
// no_job can be the right answer while a queued job exists. Under the
// relaxed specification no_job and no_slot are always allowed and change no
// job, so dropping them is exact; the slot counter of a one-job model never
// exceeds one live attempt, so it never refuses a lease the service made.
//
// With Lease relaxed, the specification is a product of independent per-job
// objects, and by locality of linearizability (Herlihy and Wing) the whole
// history is linearizable if and only if every job's sub-history is, which
// is exactly what porcupine's Partition requires. In the other direction,
// any linearization under the full model restricts to a legal per-job one
// (the relaxed guards accept whatever the full ones accept, and no other
// job's operation changes J), so an Illegal verdict is a genuine violation,
// never an artifact of the partitioning. What this check does not see is
// the cross-job rules themselves (queue order, slot counting across jobs);
// the differential tests and invariant 9 cover those.
//
// # Time
//
// Time moves in steps. A clock client advances the recorder's clock
// (Tick) while no other operation is in flight: the tick waits for the
// running ones and holds back new ones, so every operation runs at one
// instant and real-time order agrees with time order. Every operation
// records the instant it was given (Input.Now) and the real system gets
// exactly that instant (the clock is injected, as the service layer takes
// now). Between ticks the clock client sweeps once (Sweep), concurrently
// with everything else, so leases expire, lost attempts are requeued or
// fail, verification deadlines pass and admission deadlines fail queued
// jobs inside the checked histories.
//
// In the model, the clock is part of a partition's state: a tick moves it
// forward, and any other operation is legal only at the instant the state
// holds. Ticks and sweeps touch every job, so they are copied into every
// partition; a sweep's copy carries what it did to that job (its sweeper
// journal rows, attributable because a sweep is alone in its instant). The
// model's sweep must do the same to the job. Splitting a sweep so is sound
// for refutation (a linearization of the whole history restricts to each
// job), though it does not check that one sweep's effects on different jobs
// happened at one point. The recorder's timestamps (monotonic time.Since)
// are observations only; no decision uses them.

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/protocol"
)

// Op names an operation of a recorded history.
type Op string

// The recorded operations. Commit is two operations, as it is two
// transactions: CommitFinish is verification plus transaction 2, run by the
// client that got commit_pending from CommitBegin.
const (
	Lease        Op = "lease"
	Progress     Op = "progress"
	CommitBegin  Op = "commit_begin"
	CommitFinish Op = "commit_finish"
	Fail         Op = "fail"
	Cancel       Op = "cancel"
	// Tick moves the clock to Now; Sweep runs the sweeper at Now.
	Tick  Op = "tick"
	Sweep Op = "sweep"
	// GetJob is the buyer's read of the job (GET /v1/jobs/{id}): its
	// status, as the reply's Job. Only a Reader target serves it.
	GetJob Op = "get_job"
)

// linJobView is the code of a GetJob that found the job; one that did not
// is protocol.CodeNotFound.
const linJobView protocol.Code = "job"

// Input is what a client sent. It is comparable, as porcupine wants.
// Label names the perturbation the client applied ("" for an honest frame);
// it is shown in the visualization and never read by the model.
type Input struct {
	Op Op
	// Now is the instant the operation ran at, in microseconds after
	// World.Now.
	Now         int64
	Device      string
	Buyer       string
	JobID       string
	AttemptID   string
	Epoch       int
	Phase       protocol.AttemptStatus
	Token       string
	FailureCode protocol.FailureCode
	Output      protocol.Output
	// OutputOK says whether Output matches the bytes in the store, i.e.
	// whether verification will pass (the model's outputOK).
	OutputOK bool
	Label    string
}

func (in Input) progress() protocol.Progress {
	return protocol.Progress{Type: protocol.TypeProgress, JobID: in.JobID, AttemptID: in.AttemptID,
		LeaseEpoch: in.Epoch, Phase: in.Phase}
}

func (in Input) commit() protocol.Commit {
	return protocol.Commit{Type: protocol.TypeCommit, JobID: in.JobID, AttemptID: in.AttemptID,
		LeaseEpoch: in.Epoch, CommitToken: in.Token, Output: in.Output}
}

func (in Input) fail() protocol.Fail {
	return protocol.Fail{Type: protocol.TypeFail, JobID: in.JobID, AttemptID: in.AttemptID, LeaseEpoch: in.Epoch,
		CommitToken: in.Token, FailureCode: in.FailureCode}
}

// Output is the compared part of a protocol.Reply (everything but
// Message, Field and Existing, which these operations never set), with the
// expiry as Unix microseconds so that the struct is comparable.
type Output struct {
	Code                 protocol.Code
	Reason               protocol.ConflictReason
	Status               protocol.AttemptStatus
	JobID, AttemptID     string
	AttemptNumber        int
	LeaseEpoch           int
	Token                string
	LeaseExpiresAtMicros int64
	Requeued             bool
	// Sweep is what a sweep did: as recorded, every job's effects
	// (linEncodeSweep); in a job's partition, that job's alone.
	Sweep string
	// Job is the job's status a GetJob read.
	Job protocol.JobStatus
}

func linOutputOf(r protocol.Reply) Output {
	o := Output{Code: r.Code, Reason: r.Reason, Status: r.Status, JobID: r.JobID, AttemptID: r.AttemptID,
		AttemptNumber: r.AttemptNumber, LeaseEpoch: r.LeaseEpoch, Token: r.CommitToken, Requeued: r.Requeued}
	if !r.LeaseExpiresAt.IsZero() {
		o.LeaseExpiresAtMicros = r.LeaseExpiresAt.UnixMicro()
	}
	return o
}

// Target is the part of a fuzz.Target the clients drive. It must be
// safe for concurrent use.
type Target interface {
	Lease(ctx context.Context, now time.Time, deviceID string) (protocol.Reply, error)
	Progress(ctx context.Context, now time.Time, deviceID string, p protocol.Progress) (protocol.Reply, error)
	CommitBegin(ctx context.Context, now time.Time, deviceID string, c protocol.Commit, outputOK bool) (protocol.Reply, error)
	CommitFinish(ctx context.Context, now time.Time, jobID, attemptID string) (protocol.Reply, error)
	Fail(ctx context.Context, now time.Time, deviceID string, f protocol.Fail) (protocol.Reply, error)
	Cancel(ctx context.Context, now time.Time, buyerID, jobID string) (protocol.Reply, error)
	// SweepEffects runs the sweeper at now and returns, by job, what it
	// did (targets.SweepEffect lines of its sweeper journal rows at now).
	SweepEffects(ctx context.Context, now time.Time) (map[string][]string, error)
}

// Reader is a Target that also serves the buyer's read of a job (GetJob):
// its status, or found false when the buyer has no such job.
type Reader interface {
	GetJob(ctx context.Context, now time.Time, buyerID, jobID string) (status protocol.JobStatus, found bool, err error)
}

func linDispatch(ctx context.Context, t Target, now time.Time, in Input) (protocol.Reply, error) {
	switch in.Op {
	case Lease:
		return t.Lease(ctx, now, in.Device)
	case Progress:
		return t.Progress(ctx, now, in.Device, in.progress())
	case CommitBegin:
		return t.CommitBegin(ctx, now, in.Device, in.commit(), in.OutputOK)
	case CommitFinish:
		return t.CommitFinish(ctx, now, in.JobID, in.AttemptID)
	case Fail:
		return t.Fail(ctx, now, in.Device, in.fail())
	case Cancel:
		return t.Cancel(ctx, now, in.Buyer, in.JobID)
	}
	return protocol.Reply{}, fmt.Errorf("linearizability: unknown op %q", in.Op)
}

// Recorder records a concurrent history. It is safe for concurrent use.
type Recorder struct {
	t     Target
	start time.Time
	base  time.Time

	// clock guards now: operations hold it shared, a tick exclusively.
	clock sync.RWMutex
	now   int64 // microseconds after start
	swept atomic.Bool

	mu  sync.Mutex
	ops []porcupine.Operation
}

// NewRecorder records operations on t, the clock starting at start.
func NewRecorder(t Target, start time.Time) *Recorder {
	return &Recorder{t: t, start: start, base: time.Now()}
}

func (r *Recorder) instant(now int64) time.Time {
	return r.start.Add(time.Duration(now) * time.Microsecond)
}

// Do runs in on the target for client at the clock's instant and records it
// with its call and return instants. An infrastructure error is returned
// and not recorded: the run is then void, not a history with an unknown
// outcome.
func (r *Recorder) Do(ctx context.Context, client int, in Input) (protocol.Reply, error) {
	r.clock.RLock()
	defer r.clock.RUnlock()
	in.Now = r.now
	call := time.Since(r.base).Nanoseconds()
	var rep protocol.Reply
	var out Output
	var err error
	if in.Op == GetJob {
		out, err = linRead(ctx, r.t, r.instant(in.Now), in)
	} else {
		rep, err = linDispatch(ctx, r.t, r.instant(in.Now), in)
		out = linOutputOf(rep)
	}
	ret := time.Since(r.base).Nanoseconds()
	if err != nil {
		return rep, fmt.Errorf("client %d %s: %w", client, in.Op, err)
	}
	r.record(porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out,
		Return: ret, Metadata: in.Label})
	return rep, nil
}

// linRead runs a GetJob on a Reader target.
func linRead(ctx context.Context, t Target, now time.Time, in Input) (Output, error) {
	rd, ok := t.(Reader)
	if !ok {
		return Output{}, fmt.Errorf("linearizability: the target serves no job reads")
	}
	st, found, err := rd.GetJob(ctx, now, in.Buyer, in.JobID)
	if err != nil || !found {
		return Output{Code: protocol.CodeNotFound}, err
	}
	return Output{Code: linJobView, Job: st}, nil
}

func (r *Recorder) record(op porcupine.Operation) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Tick moves the clock forward by d once no operation is in flight.
func (r *Recorder) Tick(client int, d time.Duration) {
	r.clock.Lock()
	defer r.clock.Unlock()
	call := time.Since(r.base).Nanoseconds()
	r.now += d.Microseconds()
	r.swept.Store(false)
	in := Input{Op: Tick, Now: r.now}
	r.record(porcupine.Operation{ClientId: client, Input: in, Call: call, Output: Output{Code: "tick"},
		Return: time.Since(r.base).Nanoseconds()})
}

// Sweep runs the sweeper at the clock's instant, concurrently with other
// operations, and returns its effects by job. There is at most one sweep
// per instant (a second one returns nil and does nothing), so the sweeper
// journal rows at that instant are this sweep's.
func (r *Recorder) Sweep(ctx context.Context, client int) (map[string][]string, error) {
	r.clock.RLock()
	defer r.clock.RUnlock()
	if r.swept.Swap(true) {
		return nil, nil
	}
	in := Input{Op: Sweep, Now: r.now}
	call := time.Since(r.base).Nanoseconds()
	eff, err := r.t.SweepEffects(ctx, r.instant(in.Now))
	ret := time.Since(r.base).Nanoseconds()
	if err != nil {
		return nil, fmt.Errorf("client %d sweep: %w", client, err)
	}
	r.record(porcupine.Operation{ClientId: client, Input: in, Call: call,
		Output: Output{Code: "swept", Sweep: linEncodeSweep(eff)}, Return: ret})
	return eff, nil
}

// linEncodeSweep renders effects by job canonically: "job:effect|effect;"
// per job with effects, jobs and effects sorted.
func linEncodeSweep(eff map[string][]string) string {
	jobs := make([]string, 0, len(eff))
	for j, e := range eff {
		if len(e) > 0 {
			jobs = append(jobs, j)
		}
	}
	slices.Sort(jobs)
	var b strings.Builder
	for _, j := range jobs {
		e := slices.Clone(eff[j])
		slices.Sort(e)
		fmt.Fprintf(&b, "%s:%s;", j, strings.Join(e, "|"))
	}
	return b.String()
}

// linSweepOf is job's part of an encoded sweep ("" when it did nothing).
func linSweepOf(encoded, job string) string {
	for _, part := range strings.Split(encoded, ";") {
		if j, e, ok := strings.Cut(part, ":"); ok && j == job {
			return e
		}
	}
	return ""
}

// Operations returns a copy of what was recorded so far.
func (r *Recorder) Operations() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// World is the cast and the jobs of a run: what the per-job model is
// built from.
type World struct {
	Now             time.Time
	LeaseTTL        time.Duration
	HeartbeatWindow time.Duration
	Buyers          []fuzz.WorldBuyer
	Devices         []fuzz.WorldDevice
	// Jobs in creation order, all created at Now before any client ran.
	Jobs []Job
}

// Job is one job of the run and the request that created it.
type Job struct {
	ID      string
	Request protocol.CreateJobRequest
}

// History is a recorded history and the world it ran in.
type History struct {
	World World
	Ops   []porcupine.Operation
}

// linJobOf is the job an operation is partitioned by: the offered job for a
// lease ("" for no_job and no_slot, which are dropped), else the job the
// input names.
func linJobOf(op porcupine.Operation) string {
	in, out := op.Input.(Input), op.Output.(Output)
	switch in.Op {
	case Lease:
		if out.Code != protocol.CodeLeaseOffer {
			return ""
		}
		return out.JobID
	case Tick, Sweep:
		return out.JobID // "" as recorded; the job of a partition's copy
	}
	return in.JobID
}

// linPartition splits a history by job (see the package comment above),
// partitions in job id order so that a visualization is stable. Frames the
// fence refused whatever the state (linFenceRefused) are left out.
func linPartition(ops []porcupine.Operation) [][]porcupine.Operation {
	offers := linOffers(ops)
	byJob := map[string][]porcupine.Operation{}
	var clock []porcupine.Operation
	for _, op := range ops {
		if in := op.Input.(Input); in.Op == Tick || in.Op == Sweep {
			clock = append(clock, op)
			for _, part := range strings.Split(op.Output.(Output).Sweep, ";") {
				if j, _, ok := strings.Cut(part, ":"); ok {
					byJob[j] = append(byJob[j], nil...) // a job only sweeps touched has a partition too
				}
			}
			continue
		}
		if j := linJobOf(op); j != "" && !linFenceRefused(op, offers) {
			byJob[j] = append(byJob[j], op)
		}
	}
	// Every tick and sweep joins every job's partition, a sweep with what it
	// did to that job alone.
	for j := range byJob {
		for _, op := range clock {
			out := op.Output.(Output)
			out.JobID, out.Sweep = j, linSweepOf(out.Sweep, j)
			op.Output = out
			byJob[j] = append(byJob[j], op)
		}
	}
	keys := make([]string, 0, len(byJob))
	for k := range byJob {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, byJob[k])
	}
	return out
}

// linIdentity is what an attempt's fence compares, fixed when the attempt
// is inserted: its job, device, epoch and token hash.
type linIdentity struct {
	job, device, tokenHash string
	epoch                  int
}

// linOffers maps every offered attempt id to its identity.
func linOffers(ops []porcupine.Operation) map[string]linIdentity {
	offers := map[string]linIdentity{}
	for _, op := range ops {
		in, out := op.Input.(Input), op.Output.(Output)
		if in.Op == Lease && out.Code == protocol.CodeLeaseOffer {
			offers[out.AttemptID] = linIdentity{job: out.JobID, device: in.Device,
				tokenHash: protocol.HashCommitToken(out.Token), epoch: out.LeaseEpoch}
		}
	}
	return offers
}

// linFenceRefused reports whether op is a progress, commit_begin or fail
// whose presented identity does not match the attempt's (or names no
// offered attempt) and whose reply is the refusal that mismatch always gets.
//
// Such an operation is legal in every state of the model and changes none:
// the fence is the first check of each of these operations, and what it
// compares (the attempt's job, device, epoch and token hash) is fixed when
// the attempt is inserted, since an epoch starts at 1 and never changes
// (SPEC section 1), and an attempt that was never offered does not exist in
// any state. It can therefore be linearized anywhere in its interval, and
// leaving it out changes no verdict: a history is linearizable with it if
// and only if it is without it. This is a partial-order reduction, and it
// matters: the refused frames are most of the traffic, and porcupine would
// otherwise try their orders against each other when refuting a history.
// A refusal the model would not give (the service accepted a mismatched
// frame, or answered it otherwise) is never left out.
func linFenceRefused(op porcupine.Operation, offers map[string]linIdentity) bool {
	in, out := op.Input.(Input), op.Output.(Output)
	var want Output
	switch in.Op {
	case Progress:
		want = Output{Code: protocol.CodeLeaseConflict, Reason: protocol.ReasonIdentityMismatch}
	case CommitBegin:
		want = Output{Code: protocol.CodeCommitConflict}
	case Fail:
		want = Output{Code: protocol.CodeFailConflict}
		if !in.FailureCode.Valid() {
			return out == Output{Code: protocol.CodeBadFailureCode} // checked before anything else
		}
	default:
		return false
	}
	if out != want {
		return false
	}
	id, offered := offers[in.AttemptID]
	tokenChecked := in.Op != Progress
	return !offered || id.job != in.JobID || id.device != in.Device || id.epoch != in.Epoch ||
		(tokenChecked && protocol.HashCommitToken(in.Token) != id.tokenHash)
}

// CheckOptions tunes Check. The zero value is usable.
type CheckOptions struct {
	// Timeout bounds porcupine's search (default 20s); a search cut short
	// is Unknown, which is not ok.
	Timeout time.Duration
	// VisualizePath is where the HTML visualization is written when the
	// history is not proven linearizable; default a new file in os.TempDir.
	VisualizePath string
	// Log receives the verdict and the visualization's path (default os.Stderr).
	Log io.Writer
}

// CheckResult is CheckDetail's verdict.
type CheckResult struct {
	Result     porcupine.CheckResult
	Info       porcupine.LinearizationInfo
	Partitions int
	// Checked counts the operations in the partitions; the rest were
	// leases without an offer and frames the fence refused in any state.
	Checked int
	// Longest is the operations of the longest partition.
	Longest       int
	VisualizePath string // "" when Result is Ok
	Elapsed       time.Duration
}

// Check reports whether h is linearizable against the per-job
// model, with porcupine's linearization info. When it is not proven (Illegal
// or a timeout) it writes porcupine's visualization and logs its path.
func Check(h History, opts CheckOptions) (ok bool, info porcupine.LinearizationInfo) {
	r := CheckDetail(h, opts)
	return r.Result == porcupine.Ok, r.Info
}

// CheckDetail is Check with the full verdict.
func CheckDetail(h History, opts CheckOptions) CheckResult {
	if opts.Timeout <= 0 {
		opts.Timeout = 20 * time.Second
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	model := Model(h.World)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, h.Ops, opts.Timeout)
	out := CheckResult{Result: res, Info: info, Elapsed: time.Since(start)}
	for _, p := range linPartition(h.Ops) {
		out.Partitions++
		out.Checked += len(p)
		out.Longest = max(out.Longest, len(p))
	}
	if res == porcupine.Ok {
		return out
	}
	path, err := linVisualize(model, info, opts.VisualizePath)
	if err != nil {
		fmt.Fprintf(opts.Log, "linearizability: %s; writing the visualization failed: %v\n", res, err)
		return out
	}
	out.VisualizePath = path
	fmt.Fprintf(opts.Log, "linearizability: %s over %d job partitions; visualization: %s\n", res, out.Partitions, path)
	return out
}

func linVisualize(model porcupine.Model, info porcupine.LinearizationInfo, path string) (string, error) {
	var f *os.File
	var err error
	if path == "" {
		f, err = os.CreateTemp("", "rendermac-linearizability-*.html")
	} else {
		f, err = os.Create(path)
	}
	if err != nil {
		return "", err
	}
	if err := porcupine.Visualize(model, info, f); err != nil {
		_ = f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}

// linHash is FNV-1a of s, for porcupine's state cache.
func linHash(s string) uint64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, s)
	return h.Sum64()
}

// linShort abbreviates an id for the visualization (its last six chars).
func linShort(id string) string {
	if len(id) <= 6 {
		return id
	}
	return id[len(id)-6:]
}
