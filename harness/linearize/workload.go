package linearize

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/model"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/protocol"
)

// Workload sizes a concurrent run. Zero fields take the defaults.
type Workload struct {
	Seed            uint64
	Jobs            int // default 10
	AgentsPerDevice int // default 4 (six devices: 24 agents)
	Adversaries     int // default 24
	Cancellers      int // default 4
	AdversaryOps    int // per adversary, at most; default 40
	AdversaryMinOps int // per adversary, at least; default 10
	CancelOps       int // per canceller, default 8
	// Watchers are buyers reading their jobs (GetJob) while the rest runs,
	// each at most WatchOps times (default 60); 0 watchers: none, since
	// only a Reader target serves reads.
	Watchers int
	WatchOps int
	Duration time.Duration // default 8s; the run ends earlier once every job is terminal
	// PinTime runs without the clock client: every operation at one
	// instant, no sweeps.
	PinTime bool
}

func (w Workload) withDefaults() Workload {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&w.Jobs, 10)
	def(&w.AgentsPerDevice, 4)
	def(&w.Adversaries, 24)
	def(&w.Cancellers, 4)
	def(&w.AdversaryOps, 40)
	def(&w.AdversaryMinOps, 10)
	def(&w.CancelOps, 8)
	def(&w.WatchOps, 60)
	if w.Duration <= 0 {
		w.Duration = 8 * time.Second
	}
	return w
}

// linAdmissionWindows cycle over the jobs: with the clock moving, the short
// ones pass while a job is queued or between its attempts.
var linAdmissionWindows = []time.Duration{time.Hour, 2 * time.Minute, time.Hour, 5 * time.Minute}

// linTicks are the clock client's steps, against the 30s lease TTL: most
// keep leases alive, some outlast them.
var linTicks = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 35 * time.Second}

// linExtraDevices join fuzz.WorldDevices, so that ten jobs find ten slots
// on six devices.
var linExtraDevices = []fuzz.WorldDevice{
	{ID: "d0000000-0000-4000-8000-000000000004", Services: []string{"synthetic.mp4", "ffmpeg.h264_720p"}, SlotsTotal: 2},
	{ID: "d0000000-0000-4000-8000-000000000005", Services: []string{"synthetic.mp4"}, SlotsTotal: 2},
	{ID: "d0000000-0000-4000-8000-000000000006", Services: []string{"ffmpeg.h264_720p"}, SlotsTotal: 2},
}

// Devices is the run's device cast: the world's three and three more.
func Devices() []fuzz.WorldDevice {
	return append(slices.Clone(fuzz.WorldDevices), linExtraDevices...)
}

// NewPostgresTarget returns worker 0's Postgres target of w, seeded with
// the world's cast plus linExtraDevices.
func NewPostgresTarget(ctx context.Context, w *targets.PostgresWorkers, seed uint64) (*targets.PostgresTarget, error) {
	t, err := w.Target(ctx, 0, seed)
	if err != nil {
		return nil, err
	}
	for _, d := range linExtraDevices {
		hash := protocol.HashCommitToken("device-token-" + d.ID)
		if err := t.Service().CreateDevice(ctx, d.ID, "mac-"+linShort(d.ID), d.Services, d.SlotsTotal, hash); err != nil {
			return nil, fmt.Errorf("seed device: %w", err)
		}
	}
	return t, nil
}

// LockedModel is the model behind one mutex: an implementation that is
// linearizable by construction, for proving the checker raises no false
// alarm (and, with a model.Variant, that it catches a broken one).
type LockedModel struct {
	mu sync.Mutex
	t  *fuzz.ModelTarget
}

// NewLockedModel builds the model with the run's cast.
func NewLockedModel(seed uint64, variant string) *LockedModel {
	t := fuzz.NewModelTarget(seed, model.Variant(variant))
	for _, d := range linExtraDevices {
		t.M.AddDevice(d.ID, d.Services, d.SlotsTotal)
	}
	return &LockedModel{t: t}
}

func linLocked[T any](l *LockedModel, f func() (T, error)) (T, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return f()
}

// CreateJob implements the seeding half of a target.
func (l *LockedModel) CreateJob(ctx context.Context, now time.Time, req protocol.CreateJobRequest) (protocol.Reply, error) {
	return linLocked(l, func() (protocol.Reply, error) { return l.t.CreateJob(ctx, now, req) })
}

// Lease implements Target.
func (l *LockedModel) Lease(ctx context.Context, now time.Time, dev string) (protocol.Reply, error) {
	return linLocked(l, func() (protocol.Reply, error) { return l.t.Lease(ctx, now, dev) })
}

// Progress implements Target.
func (l *LockedModel) Progress(ctx context.Context, now time.Time, dev string, p protocol.Progress) (protocol.Reply, error) {
	return linLocked(l, func() (protocol.Reply, error) { return l.t.Progress(ctx, now, dev, p) })
}

// CommitBegin implements Target.
func (l *LockedModel) CommitBegin(ctx context.Context, now time.Time, dev string, c protocol.Commit, ok bool) (protocol.Reply, error) {
	return linLocked(l, func() (protocol.Reply, error) { return l.t.CommitBegin(ctx, now, dev, c, ok) })
}

// CommitFinish implements Target.
func (l *LockedModel) CommitFinish(ctx context.Context, now time.Time, job, att string) (protocol.Reply, error) {
	return linLocked(l, func() (protocol.Reply, error) { return l.t.CommitFinish(ctx, now, job, att) })
}

// Fail implements Target.
func (l *LockedModel) Fail(ctx context.Context, now time.Time, dev string, f protocol.Fail) (protocol.Reply, error) {
	return linLocked(l, func() (protocol.Reply, error) { return l.t.Fail(ctx, now, dev, f) })
}

// Cancel implements Target.
func (l *LockedModel) Cancel(ctx context.Context, now time.Time, buyer, job string) (protocol.Reply, error) {
	return linLocked(l, func() (protocol.Reply, error) { return l.t.Cancel(ctx, now, buyer, job) })
}

// linCreator is what seeding needs of a target.
type linCreator interface {
	CreateJob(ctx context.Context, now time.Time, req protocol.CreateJobRequest) (protocol.Reply, error)
}

// SeedWorld creates w.Jobs jobs on t at fuzz.Epoch, one after another
// before any client starts, and returns the world the model is built from.
// Services alternate (so every device gets work) and budgets run 4..10
// attempts, so that budgets run out as well as commits succeed.
func SeedWorld(ctx context.Context, t linCreator, w Workload) (World, error) {
	w = w.withDefaults()
	world := World{Now: fuzz.Epoch, LeaseTTL: fuzz.WorldLeaseTTL, HeartbeatWindow: fuzz.WorldHeartbeatWindow,
		Buyers: fuzz.WorldBuyers, Devices: Devices()}
	services := []string{"synthetic.mp4", "ffmpeg.h264_720p"}
	for i := 0; i < w.Jobs; i++ {
		req := protocol.CreateJobRequest{BuyerID: fuzz.WorldBuyers[0].ID, Service: services[i%len(services)],
			Input:       protocol.InputRef{Bytes: 1024, SHA256: protocol.HashCommitToken(fmt.Sprintf("input-%d", i))},
			MaxAttempts: 4 + i%7, AdmissionWindow: linAdmissionWindows[i%len(linAdmissionWindows)]}
		r, err := t.CreateJob(ctx, world.Now, req)
		if err != nil {
			return World{}, fmt.Errorf("seed job %d: %w", i, err)
		}
		if r.Code != protocol.CodeCreated {
			return World{}, fmt.Errorf("seed job %d: %s", i, r.Code)
		}
		world.Jobs = append(world.Jobs, Job{ID: r.JobID, Request: req})
	}
	return world, nil
}

// linRun is the shared state of one run's clients.
type linRun struct {
	world    World
	w        Workload
	rec      *Recorder
	board    *linBoard
	deadline time.Time
	stop     atomic.Bool
}

// over reports whether clients should stop starting operations: every job
// is terminal (as the replies told), the time is up, or a client failed.
// time.Now only bounds the run; no outcome depends on it.
func (r *linRun) over() bool {
	return r.aborted() || r.board.allTerminal()
}

// aborted reports whether the time is up or a client failed.
func (r *linRun) aborted() bool {
	return r.stop.Load() || time.Now().After(r.deadline)
}

// RunWorkload drives t with agents (AgentsPerDevice per device),
// adversaries and cancellers all at once and returns the recorded history.
func RunWorkload(ctx context.Context, t Target, world World, w Workload) (History, error) {
	w = w.withDefaults()
	run := &linRun{world: world, w: w, rec: NewRecorder(t, world.Now), board: newLinBoard(len(world.Jobs))}
	var roles []func(c *linClient) error
	for _, d := range world.Devices {
		dev := d.ID
		for range w.AgentsPerDevice {
			roles = append(roles, func(c *linClient) error { return c.agent(ctx, dev) })
		}
	}
	for range w.Adversaries {
		roles = append(roles, func(c *linClient) error { return c.adversary(ctx) })
	}
	for range w.Cancellers {
		roles = append(roles, func(c *linClient) error { return c.canceller(ctx) })
	}
	if !w.PinTime {
		roles = append(roles, func(c *linClient) error { return c.clock(ctx) })
	}
	for range w.Watchers {
		roles = append(roles, func(c *linClient) error { return c.watcher(ctx) })
	}
	run.deadline = time.Now().Add(w.Duration)
	clients := make([]*linClient, len(roles))
	for i := range roles {
		clients[i] = &linClient{id: i, run: run, g: fuzz.NewRng(w.Seed*7919 + uint64(i))}
	}
	// The first canceller cancels the first job before anyone else starts,
	// so every run holds a cancel that took effect whatever the scheduler
	// does: on a fast target, or a loaded machine, the concurrent ones can
	// all land on jobs already ended.
	if w.Cancellers > 0 && len(world.Jobs) > 0 {
		first := clients[len(world.Devices)*w.AgentsPerDevice+w.Adversaries]
		if err := first.openingCancel(ctx); err != nil {
			return History{World: world, Ops: run.rec.Operations()}, err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(roles))
	for i, role := range roles {
		c := clients[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = role(c); errs[i] != nil {
				run.stop.Store(true)
			}
		}()
	}
	wg.Wait()
	return History{World: world, Ops: run.rec.Operations()}, errors.Join(errs...)
}

// Clients is the number of concurrent clients RunWorkload starts.
func Clients(world World, w Workload) int {
	w = w.withDefaults()
	n := len(world.Devices)*w.AgentsPerDevice + w.Adversaries + w.Cancellers + w.Watchers
	if !w.PinTime {
		n++
	}
	return n
}

// clock is the clock client: tick, pause, sweep, pause, until the run is
// over. Ticks are drawn from linTicks by the client's seeded PRNG.
func (c *linClient) clock(ctx context.Context) error {
	for !c.run.over() {
		c.pause(20, 80)
		c.run.rec.Tick(c.id, linTicks[c.g.IntN(len(linTicks))])
		c.pause(20, 80)
		eff, err := c.run.rec.Sweep(ctx, c.id)
		if err != nil {
			return err
		}
		for job, lines := range eff {
			for _, l := range lines {
				if strings.HasPrefix(l, "job ") && slices.ContainsFunc(strings.Fields(l), linTerminal) {
					c.run.board.markTerminal(job)
				}
			}
		}
	}
	return nil
}

// linTerminal reports whether an effect's "from>to" ends in a terminal job status.
func linTerminal(fromTo string) bool {
	_, to, ok := strings.Cut(fromTo, ">")
	return ok && protocol.JobStatus(to).Terminal()
}

// Codes counts the recorded operations by op, code, reason or status,
// and label, e.g. "commit_begin commit_conflict [stale_token]": for logs, and
// for asserting which branches a run reached.
func Codes(h History) map[string]int {
	out := map[string]int{}
	for _, op := range h.Ops {
		in, o := op.Input.(Input), op.Output.(Output)
		if in.Op == Sweep {
			for _, part := range strings.Split(o.Sweep, ";") {
				_, eff, _ := strings.Cut(part, ":")
				for _, l := range strings.Split(eff, "|") {
					if f := strings.Fields(l); len(f) >= 2 {
						out["sweep "+strings.Join(slices.DeleteFunc(f, protocol.ValidID), " ")]++
					}
				}
			}
		}
		k := string(in.Op) + " " + string(o.Code)
		if o.Reason != "" {
			k += "/" + string(o.Reason)
		} else if o.Status != "" {
			k += "/" + string(o.Status)
		}
		if in.Label != "" {
			k += " [" + in.Label + "]"
		}
		out[k]++
	}
	return out
}

// FormatCodes renders Codes one per line, sorted.
func FormatCodes(codes map[string]int) string {
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%6d  %s\n", codes[k], k)
	}
	return b.String()
}

// SweepEffects implements Target: the model's sweep, and its sweeper
// journal rows by job.
func (l *LockedModel) SweepEffects(_ context.Context, now time.Time) (map[string][]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	before := len(l.t.M.Snapshot().Journal)
	l.t.M.Sweep(now)
	eff := map[string][]string{}
	for _, e := range l.t.M.Snapshot().Journal[before:] {
		if e.Actor == protocol.ActorSweeper {
			eff[e.JobID] = append(eff[e.JobID], targets.SweepEffect(e.Kind, e.AttemptID, e.From, e.To, e.Code))
		}
	}
	return eff, nil
}
