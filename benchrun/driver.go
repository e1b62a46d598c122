package benchrun

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/loadgen"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/gateway"
	"github.com/rendermac/rendermac/server/gateway/gatewaytest"
)

const (
	benchService = "synthetic.mp4"
	benchBuyers  = 16
	buyerCents   = 1 << 40
	submitters   = 16
	maxInflight  = 128
	dialers      = 32
	// phaseTimeout bounds every wait for the stack to finish a phase's jobs.
	phaseTimeout = 3 * time.Minute
)

// Operation names of the client-side timings.
const (
	opCreate   = "CreateJob (POST /v1/jobs round trip)"
	opLease    = "Lease (slot free -> lease_offer, peak phase)"
	opProgress = "Progress (progress -> progress_ok)"
	opUpload   = "upload (PUT grant URL)"
	opCommit   = "Commit (commit -> commit_ok: tx1 + verify + tx2)"
)

var opWhat = map[string]string{
	opCreate:   "buyer HTTP request: auth, CreateJob tx with input stored, job view read",
	opLease:    "gateway Lease tx after the agent's slot freed (hello or commit_ok); includes the gateway's scheduling",
	opProgress: "WebSocket round trip of one Progress tx",
	opUpload:   "artifact PUT through the signed grant URL (not a transaction)",
	opCommit:   "WebSocket round trip of Commit: tx1, MP4 verification, tx2",
}

type device struct{ id, token string }

// agent is one simulated device with Slots slots: its reader routes every
// frame about an attempt to that attempt's worker, and each lease_offer
// starts a worker that takes the attempt through progress, upload and
// commit.
type agent struct {
	device
	c *gatewaytest.Client

	mu sync.Mutex
	// free holds the instants slots freed (hello, or a commit_ok), oldest
	// first: an offer fills the slot that has waited longest.
	free    []time.Time
	waiting map[string]chan any
	workers sync.WaitGroup
}

// slotFreed records that a slot freed at t.
func (a *agent) slotFreed(t time.Time) {
	a.mu.Lock()
	a.free = append(a.free, t)
	a.mu.Unlock()
}

// take registers o's attempt and returns the instant its slot freed.
func (a *agent) take(o *protocol.LeaseOffer, slots int) (time.Time, chan any, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.waiting) >= slots {
		return time.Time{}, nil, fmt.Errorf("lease_offer %s on a session whose %d slots are all busy", o.JobID, slots)
	}
	var freed time.Time
	if len(a.free) > 0 {
		freed, a.free = a.free[0], a.free[1:]
	}
	ch := make(chan any, 16)
	a.waiting[o.AttemptID] = ch
	return freed, ch, nil
}

func (a *agent) done(attemptID string) {
	a.mu.Lock()
	delete(a.waiting, attemptID)
	a.mu.Unlock()
}

// route hands a frame to the worker of the attempt it is about.
func (a *agent) route(msg any) {
	var id string
	final := false // the attempt's last frame: its slot is free from here on
	switch m := msg.(type) {
	case *protocol.ProgressOK:
		id = m.AttemptID
	case *protocol.LeaseConflict:
		id = m.AttemptID
	case *protocol.CommitOK:
		id, final = m.AttemptID, true
	case *protocol.CommitRejected:
		id, final = m.AttemptID, true
	default:
		return // nothing else is expected
	}
	a.mu.Lock()
	ch := a.waiting[id]
	if final {
		// Freed here, in the reader, not when the worker gets to it: the
		// gateway may offer the slot again right behind this frame.
		delete(a.waiting, id)
	}
	a.mu.Unlock()
	if ch != nil {
		select {
		case ch <- msg:
		default: // a worker never has more than one frame outstanding
		}
	}
}

// driver is the buyers and agents of one stack run.
type driver struct {
	cfg Config
	// baseURL is the server's; pool and svc reach its database, for the
	// setup (buyers, devices) and the checks after the load only.
	baseURL string
	pool    *pgxpool.Pool
	svc     *server.Service
	// gw is the in-process gateway (its wake-up counters for the idle
	// phase); nil with --client-only, which runs no idle phase.
	gw    *gateway.Gateway
	httpc *http.Client
	rec   recorder
	input []byte // the tiny input every job carries

	buyers  []*loadgen.Buyer
	devices []device // agents first, then idle sessions
	next    atomic.Uint64

	agentCtx    context.Context
	stopAgents  context.CancelFunc
	agentsWG    sync.WaitGroup
	agents      []*agent
	firstErr    error
	peak        atomic.Bool
	progressing atomic.Bool
	counting    atomic.Bool
	holding     atomic.Int64
	progressOK  atomic.Int64
	conflicts   atomic.Int64
	commits     atomic.Int64
	rejected    atomic.Int64

	mu         sync.Mutex
	offers     int
	firstOffer time.Time
	lastOffer  time.Time
	lastCommit time.Time
	jobAt      map[string]jobTimes
}

// jobTimes are the instants an agent saw of one job: its offer, its commit
// sent (after progress and the upload), and its commit_ok; and, in the
// latency phase, when the buyer's POST was answered.
type jobTimes struct{ offered, sent, done, posted time.Time }

func newDriver(cfg Config, baseURL string, pool *pgxpool.Pool, svc *server.Service) *driver {
	return &driver{cfg: cfg, baseURL: baseURL, pool: pool, svc: svc, httpc: newHTTPClient(), jobAt: map[string]jobTimes{},
		input: []byte("rendermac bench input")}
}

// metricsBase is the base URL of the server's /metrics.
func (d *driver) metricsBase() string {
	if d.cfg.MetricsURL != "" {
		return strings.TrimSuffix(d.cfg.MetricsURL, "/")
	}
	return d.baseURL
}

func (d *driver) fail(err error) {
	d.mu.Lock()
	if d.firstErr == nil {
		d.firstErr = err
	}
	d.mu.Unlock()
}

func (d *driver) err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.firstErr
}

func (d *driver) run(ctx context.Context, res *Result, phase func(string, time.Time), t0 time.Time) error {
	if err := d.setup(ctx); err != nil {
		return err
	}
	phase("setup", t0)
	d.agentCtx, d.stopAgents = context.WithCancel(ctx)

	t0 = time.Now()
	if err := d.peakPhase(ctx, res); err != nil {
		return fmt.Errorf("peak phase: %w", err)
	}
	phase("peak", t0)

	t0 = time.Now()
	if err := d.latencyPhase(ctx, res); err != nil {
		return fmt.Errorf("latency phase: %w", err)
	}
	phase("latency", t0)

	t0 = time.Now()
	if err := d.progressPhase(ctx, res); err != nil {
		return fmt.Errorf("progress phase: %w", err)
	}
	phase("progress", t0)

	if !d.cfg.skipMemory {
		t0 = time.Now()
		if err := d.memoryPhase(ctx, res); err != nil {
			return fmt.Errorf("memory phase: %w", err)
		}
		phase("memory", t0)
	}

	res.Ops = d.opStats()
	res.Slowest = d.slowest(ctx, res.Ops)
	return nil
}

// setup creates the buyers (with API keys) and every device identity with a
// known token, directly through the service and SQL helpers.
func (d *driver) setup(ctx context.Context) error {
	svc, pool := d.svc, d.pool
	for i := range benchBuyers {
		id := protocol.UUIDFrom(rand.Reader)
		if err := svc.CreateBuyer(ctx, id, fmt.Sprintf("bench buyer %d", i), buyerCents); err != nil {
			return err
		}
		key, err := api.CreateAPIKey(ctx, pool, id)
		if err != nil {
			return err
		}
		d.buyers = append(d.buyers, &loadgen.Buyer{BaseURL: d.baseURL, Key: key, HTTP: d.httpc})
	}
	n := d.cfg.Agents + d.cfg.IdleSessions
	d.devices = make([]device, n)
	return parallel(8, n, func(i int) error {
		tok := make([]byte, 24)
		if _, err := rand.Read(tok); err != nil {
			return err
		}
		dev := device{id: protocol.UUIDFrom(rand.Reader), token: "rmbench_" + hex.EncodeToString(tok)}
		d.devices[i] = dev
		return svc.CreateDevice(ctx, dev.id, "bench-"+strconv.Itoa(i), []string{benchService}, d.cfg.Slots,
			protocol.HashCommitToken(dev.token))
	})
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func parallel(workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(workers, max(n, 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// submit creates one job through POST /v1/jobs and returns its id and the
// instant the request began.
func (d *driver) submit(ctx context.Context, tag string) (string, time.Time, error) {
	b := d.buyers[d.next.Add(1)%uint64(len(d.buyers))]
	start := time.Now()
	job, err := b.CreateJob(ctx, loadgen.JobRequest{Service: benchService, Params: map[string]string{"bench": tag},
		Input: d.input})
	// Timed whenever the server answered, as a refusal's round trip is one too.
	if se := (*loadgen.StatusError)(nil); err == nil || errors.As(err, &se) {
		d.rec.add(opCreate, time.Since(start))
	}
	if err != nil {
		return "", start, err
	}
	return job.ID, start, nil
}

// connect dials and hellos the first n devices as agents and starts their
// loops.
func (d *driver) connect(ctx context.Context, n int) error {
	agents := make([]*agent, n)
	err := parallel(dialers, n, func(i int) error {
		c, err := d.dial(ctx, d.devices[i])
		if err != nil {
			return err
		}
		agents[i] = &agent{device: d.devices[i], c: c, waiting: map[string]chan any{}}
		for range d.cfg.Slots {
			agents[i].slotFreed(time.Now())
		}
		return nil
	})
	for _, a := range agents {
		if a == nil {
			continue
		}
		d.agents = append(d.agents, a)
		d.agentsWG.Go(func() { d.agentLoop(a) })
	}
	return err
}

func (d *driver) dial(ctx context.Context, dev device) (*gatewaytest.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, resp, err := gatewaytest.Dial(dctx, gatewaytest.WSURL(d.baseURL, "/v1/provider/ws"), dev.token)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: HTTP %d: %w", dev.id, resp.StatusCode, err)
		}
		return nil, fmt.Errorf("dial %s: %w", dev.id, err)
	}
	if _, err := c.Hello(dctx, []string{benchService}, d.cfg.Slots, d.cfg.Slots); err != nil {
		c.Drop()
		return nil, fmt.Errorf("hello %s: %w", dev.id, err)
	}
	return c, nil
}

// agentLoop serves one session until it ends: its reader starts a worker
// for each lease_offer (at most Slots at once) and routes the other frames
// to the worker of their attempt.
func (d *driver) agentLoop(a *agent) {
	ctx := d.agentCtx
	defer a.workers.Wait()
	for {
		msg, err := a.c.Next(ctx)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, gatewaytest.ErrClosed) {
				d.fail(fmt.Errorf("agent %s: %w", a.id, err))
			}
			return
		}
		o, ok := msg.(*protocol.LeaseOffer)
		if !ok {
			a.route(msg)
			continue
		}
		freed, ch, err := a.take(o, d.cfg.Slots)
		if err != nil {
			d.fail(fmt.Errorf("agent %s: %w", a.id, err))
			return
		}
		a.workers.Go(func() {
			defer a.done(o.AttemptID)
			if err := d.work(ctx, a, o, freed, ch); err != nil && ctx.Err() == nil {
				d.fail(fmt.Errorf("agent %s job %s: %w", a.id, o.JobID, err))
			}
		})
	}
}

func (d *driver) work(ctx context.Context, a *agent, o *protocol.LeaseOffer, freed time.Time, ch chan any) error {
	now := time.Now()
	d.mu.Lock()
	d.offers++
	if d.firstOffer.IsZero() {
		d.firstOffer = now
	}
	d.lastOffer = now
	d.jobAt[o.JobID] = jobTimes{offered: now}
	d.mu.Unlock()
	if d.peak.Load() {
		d.rec.add(opLease, now.Sub(freed))
	}
	if d.progressing.Load() {
		d.holding.Add(1)
		for d.progressing.Load() {
			ok, err := d.progress(ctx, a, o, ch)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if d.counting.Load() {
				d.progressOK.Add(1)
			}
		}
		d.holding.Add(-1)
	}
	if ok, err := d.progress(ctx, a, o, ch); err != nil {
		return err
	} else if !ok {
		return errors.New("lease_conflict on uploading")
	}
	out, err := d.upload(ctx, o)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := a.c.Send(ctx, gatewaytest.Commit(o, out)); err != nil {
		return err
	}
	msg, err := nextFor(ctx, ch)
	if err != nil {
		return err
	}
	done := time.Now()
	switch m := msg.(type) {
	case *protocol.CommitOK:
		d.rec.add(opCommit, done.Sub(start))
		d.mu.Lock()
		t := d.jobAt[o.JobID]
		t.sent, t.done = start, done
		d.jobAt[o.JobID] = t
		d.lastCommit = done
		d.mu.Unlock()
		d.commits.Add(1)
	case *protocol.CommitRejected:
		d.rejected.Add(1)
		return fmt.Errorf("commit_rejected %s: %s", m.Code, m.Message)
	default:
		return fmt.Errorf("after commit: unexpected %T %+v", msg, msg)
	}
	a.slotFreed(done)
	return nil
}

// nextFor returns the next frame about the attempt whose frames ch gets.
func nextFor(ctx context.Context, ch chan any) (any, error) {
	t := time.NewTimer(60 * time.Second)
	defer t.Stop()
	select {
	case msg := <-ch:
		return msg, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, errors.New("no reply within 60s")
	}
}

// progress reports uploading and waits for the answer; false on
// lease_conflict.
func (d *driver) progress(ctx context.Context, a *agent, o *protocol.LeaseOffer, ch chan any) (bool, error) {
	start := time.Now()
	if err := a.c.Send(ctx, gatewaytest.Progress(o, protocol.AttemptUploading)); err != nil {
		return false, err
	}
	msg, err := nextFor(ctx, ch)
	if err != nil {
		return false, err
	}
	switch m := msg.(type) {
	case *protocol.ProgressOK:
		d.rec.add(opProgress, time.Since(start))
		return true, nil
	case *protocol.LeaseConflict:
		d.conflicts.Add(1)
		return false, nil
	default:
		return false, fmt.Errorf("after progress: unexpected %T %+v", m, m)
	}
}

// upload PUTs a small valid MP4 to the offer's grant URL.
func (d *driver) upload(ctx context.Context, o *protocol.LeaseOffer) (protocol.Output, error) {
	start := time.Now()
	out, err := UploadSynthetic(ctx, d.httpc, o)
	if err == nil {
		d.rec.add(opUpload, time.Since(start))
	}
	return out, err
}

// UploadSynthetic PUTs a small valid MP4 (seeded by the attempt) to the
// offer's grant URL and returns the output to commit.
func UploadSynthetic(ctx context.Context, httpc *http.Client, o *protocol.LeaseOffer) (protocol.Output, error) {
	data := mp4.Synthetic(mp4.SyntheticParams{Seed: o.AttemptID, MdatBytes: 2048})
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, o.Output.UploadURL, bytes.NewReader(data))
	if err != nil {
		return protocol.Output{}, err
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return protocol.Output{}, fmt.Errorf("upload: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return protocol.Output{}, fmt.Errorf("upload: HTTP %d: %s", resp.StatusCode, body)
	}
	sum := sha256.Sum256(data)
	return protocol.Output{Key: o.Output.Key, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}, nil
}

// waitCommits waits until the commit counter reaches target.
func (d *driver) waitCommits(ctx context.Context, target int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for d.commits.Load() < target {
		if err := d.err(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d commits after %s", d.commits.Load(), target, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return d.err()
}

// peakPhase submits every job first, then connects the agents and lets
// them drain the queue.
func (d *driver) peakPhase(ctx context.Context, res *Result) error {
	m := d.cfg.Jobs
	fmt.Fprintf(d.cfg.Log, "bench: peak: submitting %d jobs through POST /v1/jobs\n", m)
	t0 := time.Now()
	if err := parallel(submitters, m, func(i int) error {
		_, _, err := d.submit(ctx, "peak-"+strconv.Itoa(i))
		return err
	}); err != nil {
		return err
	}
	res.Peak.Jobs = m
	res.Peak.SubmitPerSec = float64(m) / time.Since(t0).Seconds()
	// The queue is measured as autovacuum keeps it, with statistics, just
	// as pgbench's seeded database is ANALYZEd: a never-analyzed jobs table
	// looks empty to the planner, whose lease pick then sorts the whole
	// queue (11 ms a pick at 2,400 queued) instead of reading
	// jobs_queued_idx in order (0.1 ms).
	if _, err := d.pool.Exec(ctx, "ANALYZE"); err != nil {
		return fmt.Errorf("analyze after submitting: %w", err)
	}
	fmt.Fprintf(d.cfg.Log, "bench: peak: connecting %d agents\n", d.cfg.Agents)
	db0, dbErr := scrapeDB(ctx, d.httpc, d.metricsBase(), d.cfg.MetricsToken)
	cpu := startCPU(ctx, d.pool, d.cfg.serverPID)
	d.peak.Store(true)
	if err := d.connect(ctx, d.cfg.Agents); err != nil {
		return err
	}
	if err := d.waitCommits(ctx, int64(m), phaseTimeout); err != nil {
		return err
	}
	res.Peak.CPU = cpu.per(m)
	d.peak.Store(false)
	d.peakDB(ctx, res, db0, dbErr)
	d.mu.Lock()
	defer d.mu.Unlock()
	leaseWin := d.lastOffer.Sub(d.firstOffer).Seconds()
	commitWin := d.lastCommit.Sub(d.firstOffer).Seconds()
	// The first offer opens both windows, so n offers span n-1 intervals.
	res.Peak.LeasesPerSec = float64(d.offers-1) / leaseWin
	res.Peak.CommitsPerSec = float64(m) / commitWin
	res.Peak.WindowS = commitWin
	res.Peak.Rejected = int(d.rejected.Load())
	return nil
}

// peakDB records the server's database work since before (scraped before
// the agents connected) into res.DB.
func (d *driver) peakDB(ctx context.Context, res *Result, before map[string]dbstat.Counts, err error) {
	var after map[string]dbstat.Counts
	if err == nil {
		after, err = scrapeDB(ctx, d.httpc, d.metricsBase(), d.cfg.MetricsToken)
	}
	d.mu.Lock()
	res.DB = DBResult{Jobs: int(d.commits.Load()), Offers: d.offers}
	d.mu.Unlock()
	if err != nil {
		res.DB.Error = err.Error()
		return
	}
	res.DB.ByOp = diffCounts(before, after)
}

// latencyPhase submits open-loop at half the peak commit rate (the
// bottleneck of a drained queue) and measures each job's submit ->
// commit_ok.
func (d *driver) latencyPhase(ctx context.Context, res *Result) error {
	rate := res.Peak.CommitsPerSec / 2
	if !(rate > 0) {
		return errors.New("no peak rate to halve")
	}
	k := int(rate * d.cfg.Duration.Seconds())
	k = max(20, min(k, d.cfg.Jobs))
	res.Latency.TargetPerSec = rate
	res.Latency.Jobs = k
	res.Latency.Definition = "commit_ok receive time at the agent minus the instant the buyer began POST /v1/jobs (same process clock)"
	fmt.Fprintf(d.cfg.Log, "bench: latency: %d jobs at %.0f/s (half the peak commit rate)\n", k, rate)
	base := d.commits.Load()
	interval := time.Duration(float64(time.Second) / rate)
	submitAt := make(map[string][2]time.Time, k) // POST begun, answered
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxInflight)
	var subErr error
	var errOnce sync.Once
	t0 := time.Now()
	for i := range k {
		if wait := time.Until(t0.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		if ctx.Err() != nil || d.err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			id, at, err := d.submit(ctx, "lat-"+strconv.Itoa(i))
			if err != nil {
				errOnce.Do(func() { subErr = err })
				return
			}
			posted := time.Now()
			mu.Lock()
			submitAt[id] = [2]time.Time{at, posted}
			mu.Unlock()
		})
	}
	wg.Wait()
	if subErr != nil {
		return subErr
	}
	if err := d.waitCommits(ctx, base+int64(k), phaseTimeout); err != nil {
		return err
	}
	var lat, post, toOffer, work, commit []time.Duration
	var slowest LatencyStages
	var worst time.Duration
	d.mu.Lock()
	for id, sub := range submitAt {
		t, ok := d.jobAt[id]
		if !ok || t.done.IsZero() {
			continue
		}
		at := sub[0]
		t.posted = sub[1]
		e2e := t.done.Sub(at)
		if e2e > worst {
			worst, slowest = e2e, stagesOf(at, t)
		}
		lat = append(lat, e2e)
		post = append(post, t.posted.Sub(at))
		toOffer, work, commit = append(toOffer, t.offered.Sub(at)), append(work, t.sent.Sub(t.offered)),
			append(commit, t.done.Sub(t.sent))
	}
	d.mu.Unlock()
	res.Latency.Completed = len(lat)
	res.Latency.P50ms = ms(quantile(lat, 0.50))
	res.Latency.P90ms = ms(quantile(lat, 0.90))
	res.Latency.P99ms = ms(quantile(lat, 0.99))
	res.Latency.Maxms = ms(quantile(lat, 1))
	res.Latency.StagesP99 = LatencyStages{PostMS: ms(quantile(post, 0.99)), ToOfferMS: ms(quantile(toOffer, 0.99)),
		WorkMS: ms(quantile(work, 0.99)), CommitMS: ms(quantile(commit, 0.99))}
	res.Latency.Slowest = slowest
	return nil
}

// stagesOf is one job's stages, from its submit at.
func stagesOf(at time.Time, t jobTimes) LatencyStages {
	return LatencyStages{PostMS: ms(t.posted.Sub(at)), ToOfferMS: ms(t.offered.Sub(at)), WorkMS: ms(t.sent.Sub(t.offered)),
		CommitMS: ms(t.done.Sub(t.sent))}
}

// progressPhase gives every agent one job per slot and has it heartbeat as fast as
// progress_ok comes back, for half of Duration; then the jobs are committed.
func (d *driver) progressPhase(ctx context.Context, res *Result) error {
	n := len(d.agents) * d.cfg.Slots
	window := d.cfg.Duration / 2
	fmt.Fprintf(d.cfg.Log, "bench: progress: %d attempts (%d agents x %d slots) heartbeating for %s\n", n, len(d.agents),
		d.cfg.Slots, window)
	base := d.commits.Load()
	d.progressing.Store(true)
	if err := parallel(submitters, n, func(i int) error {
		_, _, err := d.submit(ctx, "prog-"+strconv.Itoa(i))
		return err
	}); err != nil {
		d.progressing.Store(false)
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for d.holding.Load() < int64(n) && time.Now().Before(deadline) && d.err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	d.counting.Store(true)
	t0 := time.Now()
	time.Sleep(window)
	d.counting.Store(false)
	elapsed := time.Since(t0)
	d.progressing.Store(false)
	res.Progress.Frames = d.progressOK.Load()
	res.Progress.WindowS = elapsed.Seconds()
	res.Progress.FramesPerSec = float64(res.Progress.Frames) / elapsed.Seconds()
	res.Progress.Conflicts = d.conflicts.Load()
	return d.waitCommits(ctx, base+int64(n), phaseTimeout)
}

// closeAll ends every session the driver opened and stops the agent loops.
func (d *driver) closeAll() {
	var wg sync.WaitGroup
	closeC := func(c *gatewaytest.Client) { wg.Go(c.Close) }
	for _, a := range d.agents {
		closeC(a.c)
	}
	wg.Wait()
	if d.stopAgents != nil {
		d.stopAgents()
	}
	d.agentsWG.Wait()
}

func (d *driver) opStats() []OpStats {
	d.rec.mu.Lock()
	defer d.rec.mu.Unlock()
	var out []OpStats
	for op, v := range d.rec.ops {
		out = append(out, OpStats{Op: op, Count: len(v), P50ms: ms(quantile(v, 0.5)), P99ms: ms(quantile(v, 0.99)),
			Maxms: ms(quantile(v, 1)), What: opWhat[op]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].P99ms > out[j].P99ms })
	return out
}

// slowest names the slowest transaction: from pg_stat_statements when the
// cluster has it loaded, else the service operation with the highest
// client-side p99 (the artifact upload is not a transaction, and the lease
// gap includes the gateway's scheduling; both are left out).
func (d *driver) slowest(ctx context.Context, ops []OpStats) Slowest {
	var s Slowest
	for _, o := range ops {
		if o.Op == opUpload || o.Op == opLease {
			continue // not a request -> reply round trip of one operation
		}
		s = Slowest{Name: o.Op, P99ms: o.P99ms}
		break
	}
	var query string
	var mean float64
	err := d.pool.QueryRow(ctx, `SELECT query, mean_exec_time FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY mean_exec_time DESC LIMIT 1`).Scan(&query, &mean)
	if err != nil {
		s.Method = "client-side request -> reply round trip of each service operation over all phases, highest p99; " +
			"the lease gap (slot free -> offer) includes gateway scheduling and is listed but not ranked " +
			"(pg_stat_statements unavailable: " + firstLine(err.Error()) + ")"
		return s
	}
	s.Method = fmt.Sprintf("client-side p99; pg_stat_statements' slowest statement by mean is %.2f ms: %s", mean, firstLine(query))
	return s
}

func firstLine(s string) string {
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// quantile is the q-quantile (nearest rank) of v; 0 for none.
func quantile(v []time.Duration, q float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
