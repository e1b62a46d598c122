package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/rendermac/rendermac/harness/loadgen"
	"github.com/rendermac/rendermac/internal/dbstat"
)

// startCPU meters the stack's processes: Postgres, this one and the
// two-process server, or says the server is not one of them.
func (d *driver) startCPU(ctx context.Context) *cpuMeter {
	m := startCPU(ctx, d.pool, d.cfg.serverPID)
	m.serverElsewhere = d.cfg.serverElsewhere
	return m
}

// peakPhase submits every job first, then connects the agents and lets
// them drain the queue.
func (d *driver) peakPhase(ctx context.Context, res *Result) error {
	m := d.cfg.Jobs
	fmt.Fprintf(d.cfg.Log, "bench: peak: submitting %d jobs through POST /v1/jobs\n", m)
	stmts0, stmtErr := d.snapshotStatements(ctx)
	whole := d.startCPU(ctx)
	submitS, err := d.submitAll(ctx, m, "peak")
	if err != nil {
		return err
	}
	res.Peak.Jobs = m
	res.Peak.SubmitPerSec = float64(m) / submitS
	fmt.Fprintf(d.cfg.Log, "bench: peak: connecting %d agents\n", d.cfg.Agents)
	db0, dbErr := scrapeDB(ctx, d.httpc, d.metricsBase(), d.cfg.MetricsToken)
	cpu := d.startCPU(ctx)
	d.peak.Store(true)
	if err := d.drain(ctx, 0, m); err != nil {
		return err
	}
	res.Peak.CPU = cpu.per(m)
	res.Peak.WholeCPU = whole.per(m)
	d.peak.Store(false)
	d.peakStatements(ctx, res, stmts0, stmtErr)
	d.peakDB(ctx, res, db0, dbErr)
	d.mu.Lock()
	defer d.mu.Unlock()
	leaseWin := d.lastOffer.Sub(d.firstOffer).Seconds()
	commitWin := d.lastCommit.Sub(d.firstOffer).Seconds()
	// The first offer opens both windows, so n offers span n-1 intervals.
	res.Peak.LeasesPerSec = float64(d.offers-1) / leaseWin
	res.Peak.CommitsPerSec = float64(m) / commitWin
	res.Peak.WindowS = commitWin
	res.Peak.JobsPerSec = float64(m) / (submitS + commitWin)
	res.Peak.Rejected = int(d.rejected.Load())
	return nil
}

// submitAll creates m jobs through POST /v1/jobs from the submitters and
// returns the seconds it took; then ANALYZE.
func (d *driver) submitAll(ctx context.Context, m int, tag string) (float64, error) {
	t0 := time.Now()
	if err := loadgen.Parallel(submitters, m, func(i int) error {
		_, _, err := d.submit(ctx, tag+"-"+strconv.Itoa(i))
		return err
	}); err != nil {
		return 0, err
	}
	s := time.Since(t0).Seconds()
	// The queue is measured as autovacuum keeps it, with statistics, just
	// as pgbench's seeded database is ANALYZEd: a never-analyzed jobs table
	// looks empty to the planner, whose lease pick then sorts the whole
	// queue (11 ms a pick at 2,400 queued) instead of reading
	// jobs_queued_idx in order (0.1 ms).
	if _, err := d.pool.Exec(ctx, "ANALYZE"); err != nil {
		return 0, fmt.Errorf("analyze after submitting: %w", err)
	}
	return s, nil
}

// drain connects the agents, whose first offer opens the peak's windows,
// and waits for base+m commits.
func (d *driver) drain(ctx context.Context, base int64, m int) error {
	d.mu.Lock()
	d.firstOffer, d.lastOffer, d.lastCommit = time.Time{}, time.Time{}, time.Time{}
	d.mu.Unlock()
	if err := d.connect(ctx, d.cfg.Agents); err != nil {
		return err
	}
	return d.waitCommits(ctx, base+int64(m), phaseTimeout)
}

// floorRounds pairs the peak with the replay of its statement mix
// (cfg.floor), each replay run right after its peak, in cfg.Rounds rounds:
// round 1's peak is peakPhase's; each later one cuts the agents, submits
// as many jobs again and drains them with fresh sessions. A replay that
// cannot run is reported in the floor's result, as one that cannot start.
func (d *driver) floorRounds(ctx context.Context, res *Result, phase func(string, time.Time)) error {
	f := d.cfg.floor
	if f == nil {
		return nil
	}
	for round := 1; round <= d.cfg.Rounds; round++ {
		stack := res.Peak.JobsPerSec
		if round > 1 {
			t0 := time.Now()
			var err error
			if stack, err = d.peakAgain(ctx); err != nil {
				return fmt.Errorf("peak round %d: %w", round, err)
			}
			phase(fmt.Sprintf("peak round %d", round), t0)
		}
		t0 := time.Now()
		// Neither side's window pays for the other's work: the stack's
		// database settles before each replay, and the replay's after it.
		if err := settle(ctx, d.pool, fmt.Sprintf("peak round %d", round)); err != nil {
			return err
		}
		if err := f.round(ctx, stack); err != nil {
			f.res.Error = err.Error()
			return nil
		}
		phase(fmt.Sprintf("floor round %d", round), t0)
	}
	return nil
}

// peakAgain is one more round of the peak: whole jobs/s only.
func (d *driver) peakAgain(ctx context.Context) (float64, error) {
	d.fleet.Close()
	m := d.cfg.Jobs
	base := d.commits.Load()
	submitS, err := d.submitAll(ctx, m, "peak-again-"+strconv.FormatInt(base, 10))
	if err != nil {
		return 0, err
	}
	if err := d.drain(ctx, base, m); err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return float64(m) / (submitS + d.lastCommit.Sub(d.firstOffer).Seconds()), nil
}

// snapshotStatements reads the stack database's statement counts, when
// there is a reader.
func (d *driver) snapshotStatements(ctx context.Context) (stmtCounts, error) {
	if d.cfg.stmts == nil {
		return nil, errors.New("no pg_stat_statements")
	}
	return d.cfg.stmts.snapshot(ctx)
}

// peakStatements records the statement mix since before (read before the
// first submission) into res.Mix, per peak job.
func (d *driver) peakStatements(ctx context.Context, res *Result, before stmtCounts, err error) {
	if res.Mix.Error != "" {
		return // the reader's own error, from Run
	}
	var after stmtCounts
	if err == nil {
		after, err = d.snapshotStatements(ctx)
	}
	if err != nil {
		res.Mix.Error = err.Error()
		return
	}
	res.Mix = mix(before, after, res.Peak.Jobs)
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
	n := len(d.fleet.Agents()) * d.cfg.Slots
	window := d.cfg.Duration / 2
	fmt.Fprintf(d.cfg.Log, "bench: progress: %d attempts (%d agents x %d slots) heartbeating for %s\n", n, len(d.fleet.Agents()),
		d.cfg.Slots, window)
	base := d.commits.Load()
	d.progressing.Store(true)
	if err := loadgen.Parallel(submitters, n, func(i int) error {
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
