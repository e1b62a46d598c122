package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/rendermac/rendermac/client"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/benchdb"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/server/console"
	"github.com/rendermac/rendermac/server/controlplane"
	"github.com/rendermac/rendermac/server/store"
)

// HistoryConfig sizes `rendermac bench --history`: one database per
// history size, each seeded with that many finished jobs and the same
// queue, and measured alike.
type HistoryConfig struct {
	// Sizes are the finished jobs of each database; 0 (the empty
	// database every figure is compared with) is measured first whether
	// listed or not.
	Sizes []int
	// Queued jobs wait in every database; Devices agents of Slots slots
	// each are connected for the load window.
	Queued, Devices, Slots int
	// Window is the load window whose leases and commits are timed, after
	// Warmup.
	Window, Warmup time.Duration
	// Samples is how many times each read (scrape, sweep, page) is timed.
	Samples int
	// Out is the directory of the report (HistoryReportName) and its plot
	// (HistoryPlotName).
	Out string
	// PgDir is where the cluster's data directory goes ("": the system's
	// temporary directory; never tmpfs: ten million jobs need tens of GB).
	PgDir string
	// CheckInvariants runs SPEC section 4 over each seeded database before
	// the load (it reads the whole journal: for the smaller sizes).
	CheckInvariants bool
	// SeedWorkers is how many connections seed at once.
	SeedWorkers int
	Log         io.Writer
}

// The report's and the plot's file names in HistoryConfig.Out; the
// console's cards page shows them when its cards directory holds them.
const (
	HistoryReportName = console.HistoryBenchReport
	HistoryPlotName   = console.HistoryBenchPlot
)

// HistoryGoalRatio is the goal: every figure at the largest size
// within this factor of the empty database's; HistoryGoalScrapeMS the
// scrape's own bound.
const (
	HistoryGoalRatio    = 1.2
	HistoryGoalScrapeMS = 50
)

// HistoryReport is the JSON report of a history-scale run.
type HistoryReport struct {
	Started time.Time `json:"started"`
	WallS   float64   `json:"wall_s"`
	// Host is what the figures were measured on.
	GoVersion string         `json:"go_version"`
	CPUs      int            `json:"cpus"`
	Postgres  string         `json:"postgres"`
	Queued    int            `json:"queued"`
	Devices   int            `json:"devices"`
	Slots     int            `json:"slots"`
	WindowS   float64        `json:"window_s"`
	Samples   int            `json:"samples"`
	Points    []HistoryPoint `json:"points"`
	// Figures are every figure at every size beside the empty database's,
	// in Points' order, with the ratio of the largest size to it.
	Figures []HistoryFigure `json:"figures"`
}

// HistoryPoint is one database: its history size and what it measured.
type HistoryPoint struct {
	History int                  `json:"history"`
	Seed    benchdb.HistoryStats `json:"seed"`
	// Invariants is the violation count of SPEC section 4 over the seeded
	// rows (-1: not checked).
	Invariants int `json:"invariant_violations"`
	// Lease is slot free -> lease_offer at an agent, Commit commit sent ->
	// commit_ok, over the load window; JobsPerS is commits over it (the
	// queue was seeded: a job here is lease, progress, upload, commit).
	Lease    Timing  `json:"lease"`
	Commit   Timing  `json:"commit"`
	JobsPerS float64 `json:"jobs_per_s"`
	Commits  int64   `json:"commits"`
	// Sweep is one sweeper pass (fencing.Service.Sweep) with nothing to do
	// but look; Scrape a GET /metrics.
	Sweep  Timing `json:"sweep"`
	Scrape Timing `json:"scrape"`
	// Pages are the console's pages and GET /v1/jobs, first and deep.
	Pages map[string]Timing `json:"pages"`
	// DeepRows is how many of the buyer's jobs come before GET /v1/jobs'
	// deep page.
	DeepRows int `json:"v1_deep_rows_before"`
	// Empty is the empty database measured again right after this one
	// (sizes above 0): the figures' ratios are to it.
	Empty  *HistoryPoint      `json:"empty_after,omitempty"`
	Tables []TableSize        `json:"tables"`
	PhaseS map[string]float64 `json:"phase_s"`
}

// Timing is a set of samples of one operation, in milliseconds.
type Timing struct {
	N     int     `json:"n"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
}

func timing(v []time.Duration) Timing {
	return Timing{N: len(v), P50ms: ms(quantile(v, 0.5)), P99ms: ms(quantile(v, 0.99))}
}

// TableSize is one table's heap and indexes.
type TableSize struct {
	Table      string `json:"table"`
	Rows       int64  `json:"rows_estimate"`
	HeapBytes  int64  `json:"heap_bytes"`
	IndexBytes int64  `json:"index_bytes"`
}

// HistoryFigure is one figure across the sizes.
type HistoryFigure struct {
	Name   string    `json:"name"`
	Unit   string    `json:"unit"`
	Values []float64 `json:"values"`
	// EmptyAfter is the empty database's value measured right after the
	// largest size (nil when only the empty one was measured).
	EmptyAfter *float64 `json:"empty_after_largest,omitempty"`
	// Ratio is the largest size's value over EmptyAfter (for
	// jobs/s, the empty database's over the largest's: >1 is worse, as
	// for the others).
	Ratio float64 `json:"ratio_largest_to_empty"`
	// Latency figures are drawn on the plot.
	Latency bool `json:"latency"`
	// Met is Ratio <= HistoryGoalRatio (and, for the scrape, the largest
	// size's p99 under HistoryGoalScrapeMS).
	Met bool `json:"goal_met"`
}

// historySettings make the bench's cluster fit a history of ten million
// jobs: room for the WAL of a bulk load between checkpoints, and memory
// for rebuilding indexes. Every size is measured with the same settings.
var historySettings = []string{"max_wal_size=8GB", "checkpoint_timeout=30min", "shared_buffers=512MB",
	"maintenance_work_mem=1GB", "max_parallel_maintenance_workers=1"}

// RunHistory seeds and measures one database per size, smallest first
// (each dropped after it is measured, so the disk holds one at a time),
// and writes the report and the plot into cfg.Out. The empty database
// stays up all along: right after each size is measured, it is measured
// again (HistoryPoint.Empty), so that each ratio compares two figures
// taken minutes apart on this shared machine, not an hour.
func RunHistory(ctx context.Context, cfg HistoryConfig) (*HistoryReport, error) {
	began := time.Now()
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	sizes := append([]int{0}, cfg.Sizes...)
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	rep := &HistoryReport{Started: began.UTC(), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), Queued: cfg.Queued,
		Devices: cfg.Devices, Slots: cfg.Slots, WindowS: cfg.Window.Seconds(), Samples: cfg.Samples}
	base := cfg.PgDir
	if base == "" {
		base = os.TempDir()
	}
	pg, err := pgprovider.Open(ctx, pgprovider.Options{IgnoreEnv: true, DisableDocker: true, BaseDir: base,
		Settings: append(slices.Clone(PgSettings), historySettings...), StartTimeout: 2 * time.Minute})
	if err != nil {
		return nil, err
	}
	defer pg.Close()
	if err := pg.Template(ctx, targets.TemplateName, store.Migrate); err != nil {
		return nil, fmt.Errorf("migrate template: %w", err)
	}
	rep.Postgres, _ = pg.Version(ctx)
	var empty *historyDB
	for _, n := range sizes {
		fmt.Fprintf(log, "bench: history %d: seeding\n", n)
		h, err := openHistory(ctx, pg, cfg, log, n)
		if err != nil {
			return rep, fmt.Errorf("history %d: %w", n, err)
		}
		p := &h.point
		err = h.measure(ctx, p)
		if err == nil && n > 0 {
			p.Empty = &HistoryPoint{History: 0, Pages: map[string]Timing{}, PhaseS: map[string]float64{}}
			err = empty.measure(ctx, p.Empty)
		}
		if n == 0 && err == nil {
			empty = h
		} else if cerr := h.close(ctx); err == nil {
			err = cerr
		}
		if err != nil {
			if empty != nil && empty != h {
				_ = empty.close(ctx)
			}
			return rep, fmt.Errorf("history %d: %w", n, err)
		}
		rep.Points = append(rep.Points, *p)
		rep.Figures = historyFigures(rep.Points)
		// Written after every size, so a long run that fails later keeps
		// what it measured.
		if err := rep.write(cfg.Out); err != nil {
			return rep, err
		}
	}
	if err := empty.close(ctx); err != nil {
		return rep, err
	}
	rep.WallS = time.Since(began).Seconds()
	return rep, rep.write(cfg.Out)
}

// historyDB is one seeded database with its control plane and driver.
type historyDB struct {
	cfg   HistoryConfig
	log   io.Writer
	pg    *pgprovider.Provider
	url   string
	dir   string
	plane *runningPlane
	d     *driver
	point HistoryPoint
}

// openHistory creates a database, starts a control plane on it, registers
// the buyers and seeds n finished jobs and the queue.
func openHistory(ctx context.Context, pg *pgprovider.Provider, cfg HistoryConfig, log io.Writer, n int) (h *historyDB, err error) {
	h = &historyDB{cfg: cfg, log: log, pg: pg,
		point: HistoryPoint{History: n, Invariants: -1, Pages: map[string]Timing{}, PhaseS: map[string]float64{}}}
	if h.url, err = pg.NewDatabase(ctx, targets.TemplateName); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = h.close(ctx)
		}
	}()
	p := &h.point
	t0 := time.Now()
	if h.dir, err = artifactDir(); err != nil {
		return h, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return h, err
	}
	if h.plane, err = startPlane(ctx, controlplane.Config{DB: h.url, Listen: "127.0.0.1:0", Artifacts: h.dir, SigningKey: key,
		Limits: benchLimits()}); err != nil {
		return h, err
	}
	h.d = newDriver(Config{Agents: cfg.Devices, Slots: cfg.Slots, Log: log}, h.plane.BaseURL, h.plane.Pool, h.plane.Service)
	if err := h.d.setup(ctx); err != nil {
		return h, err
	}
	h.phase(p, "setup", t0)
	t0 = time.Now()
	if p.Seed, err = seedHistory(ctx, h.d, cfg, log, n); err != nil {
		return h, err
	}
	h.phase(p, "seed", t0)
	fmt.Fprintf(log, "bench: history %d: seeded %d rows in %.1fs (%.0f rows/s, indexes %.1fs, by table %v)\n",
		n, p.Seed.Total, p.Seed.Seconds, p.Seed.RowsPerS, p.Seed.IndexSeconds, p.Seed.TableSeconds)
	if cfg.CheckInvariants {
		t0 = time.Now()
		v, err := store.CheckInvariants(ctx, h.d.pool)
		if err != nil {
			return h, fmt.Errorf("invariant check: %w", err)
		}
		p.Invariants = len(v)
		if len(v) > 0 {
			return h, fmt.Errorf("%d invariant violations in the seeded rows, first: %v", len(v), v[0])
		}
		h.phase(p, "invariants", t0)
	}
	return h, nil
}

func (h *historyDB) phase(p *HistoryPoint, name string, t0 time.Time) {
	p.PhaseS[name] = time.Since(t0).Seconds()
	fmt.Fprintf(h.log, "bench: history %d: %s done in %s\n", h.point.History, name, time.Since(t0).Round(time.Millisecond))
}

// measure times the reads, then the load, into p.
func (h *historyDB) measure(ctx context.Context, p *HistoryPoint) error {
	t0 := time.Now()
	if err := h.d.historyReads(ctx, p, h.cfg, h.point.History); err != nil {
		return err
	}
	h.phase(p, "reads", t0)
	t0 = time.Now()
	if err := h.d.historyLoad(ctx, p, h.cfg); err != nil {
		return err
	}
	h.phase(p, "load", t0)
	var err error
	p.Tables, err = tableSizes(ctx, h.d.pool)
	return err
}

// close stops the plane and drops the database.
func (h *historyDB) close(ctx context.Context) error {
	var err error
	if h.plane != nil {
		err = h.plane.stop()
	}
	if h.dir != "" {
		os.RemoveAll(h.dir)
	}
	if derr := h.pg.DropDatabase(context.WithoutCancel(ctx), h.url); err == nil {
		err = derr
	}
	return err
}

// seedHistory writes the history and the queue over the driver's buyers
// and devices, on a connection of its own.
func seedHistory(ctx context.Context, d *driver, cfg HistoryConfig, log io.Writer, n int) (benchdb.HistoryStats, error) {
	var buyers, devices []string
	var now time.Time
	if err := d.pool.QueryRow(ctx, `SELECT array_agg(id::text ORDER BY id), now() FROM buyers`).Scan(&buyers, &now); err != nil {
		return benchdb.HistoryStats{}, err
	}
	if err := d.pool.QueryRow(ctx, `SELECT array_agg(id::text ORDER BY id) FROM devices`).Scan(&devices); err != nil {
		return benchdb.HistoryStats{}, err
	}
	return benchdb.SeedHistory(ctx, d.pool.Config().ConnString(), benchdb.History{Finished: n, Queued: cfg.Queued, Buyers: buyers,
		Devices: devices, Service: benchService, PriceCents: 100, Now: now, Workers: cfg.SeedWorkers,
		Progress: func(done int, rows int64) {
			fmt.Fprintf(log, "bench: history %d: %d jobs, %d rows\n", n, done, rows)
		}})
}

// historyReads times the reads whose cost could grow with history, with
// no load running: the sweeper's pass, the scrape, the console's pages and
// GET /v1/jobs.
func (d *driver) historyReads(ctx context.Context, p *HistoryPoint, cfg HistoryConfig, n int) error {
	samples := func(f func() error) (Timing, error) {
		var v []time.Duration
		if err := f(); err != nil { // a first call warms caches and plans
			return Timing{}, err
		}
		for range cfg.Samples {
			t := time.Now()
			if err := f(); err != nil {
				return Timing{}, err
			}
			v = append(v, time.Since(t))
		}
		return timing(v), nil
	}
	var err error
	if p.Sweep, err = samples(func() error { _, err := d.svc.Sweep(ctx, time.Time{}); return err }); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if p.Scrape, err = samples(func() error { return d.get(ctx, d.baseURL+"/metrics", "") }); err != nil {
		return fmt.Errorf("scrape: %w", err)
	}
	_, cred, err := console.CreateOperator(ctx, d.pool, "history bench")
	if err != nil {
		return err
	}
	var deepSeq int64
	var someJob string
	// The job page of the same kind of job at every size: the newest
	// queued one.
	if err := d.pool.QueryRow(ctx, `SELECT max(id) / 10, (SELECT id::text FROM jobs WHERE status = 'queued' ORDER BY created_at DESC LIMIT 1)
		FROM job_events`).
		Scan(&deepSeq, &someJob); err != nil {
		return err
	}
	for _, pg := range []struct{ name, path string }{
		{"console fleet", "/console/"},
		{"console queue", "/console/queue"},
		{"console jobs", "/console/jobs"},
		{"console jobs deep", "/console/jobs?cursor=" + strconv.FormatInt(max(1, deepSeq), 10)},
		{"console jobs queued", "/console/jobs?status=queued"},
		{"console job", "/console/jobs/" + someJob},
	} {
		if p.Pages[pg.name], err = samples(func() error { return d.get(ctx, d.baseURL+pg.path, cred) }); err != nil {
			return fmt.Errorf("%s: %w", pg.name, err)
		}
	}
	b := d.buyers[0]
	if p.Pages["v1 jobs first"], err = samples(func() error { _, err := b.ListPage(ctx, client.ListOptions{}); return err }); err != nil {
		return fmt.Errorf("GET /v1/jobs: %w", err)
	}
	// The deep page: nine tenths of the buyer's jobs back, reached by
	// walking the pages at their largest.
	want := (n + cfg.Queued) / len(d.buyers) * 9 / 10
	cursor := ""
	for p.DeepRows < want {
		page, err := b.ListPage(ctx, client.ListOptions{Limit: 500, Cursor: cursor})
		if err != nil {
			return fmt.Errorf("GET /v1/jobs walking to the deep page: %w", err)
		}
		p.DeepRows += len(page.Jobs)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if p.Pages["v1 jobs deep"], err = samples(func() error { _, err := b.ListPage(ctx, client.ListOptions{Cursor: cursor}); return err }); err != nil {
		return fmt.Errorf("GET /v1/jobs deep: %w", err)
	}
	return nil
}

// get reads path and wants a 200; bearer, when set, is sent.
func (d *driver) get(ctx context.Context, u, bearer string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := d.httpc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		if len(body) > 300 {
			body = body[:300]
		}
		return fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, body)
	}
	return nil
}

// historyLoad connects the agents to the seeded queue and times leases and
// commits over the window, after the warm-up.
func (d *driver) historyLoad(ctx context.Context, p *HistoryPoint, cfg HistoryConfig) error {
	d.peak.Store(true)
	// The errors of the last window's end (its sessions closing under the
	// work in flight) are not this window's.
	d.mu.Lock()
	d.firstErr = nil
	d.mu.Unlock()
	// Devices of their own each window: the last window's left their
	// slots leased until the leases expire.
	if d.fleet != nil {
		if err := d.registerDevices(ctx, cfg.Devices); err != nil {
			return err
		}
	}
	if err := d.connect(ctx, cfg.Devices); err != nil {
		return err
	}
	defer d.closeAll()
	wait := func(t time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(t):
		}
		return d.err()
	}
	if err := wait(cfg.Warmup); err != nil {
		return err
	}
	d.rec.mu.Lock()
	d.rec.ops = nil
	d.rec.mu.Unlock()
	c0, t0 := d.commits.Load(), time.Now()
	if err := wait(cfg.Window); err != nil {
		return err
	}
	c1, win := d.commits.Load(), time.Since(t0)
	d.rec.mu.Lock()
	p.Lease, p.Commit = timing(d.rec.ops[opLease]), timing(d.rec.ops[opCommit])
	d.rec.mu.Unlock()
	p.Commits = c1 - c0
	p.JobsPerS = float64(p.Commits) / win.Seconds()
	if p.Commits == 0 {
		return fmt.Errorf("no commit in the %s window", win.Round(time.Millisecond))
	}
	return nil
}

// sqlTableSizes are the tables history grows.
const sqlTableSizes = `SELECT c.relname, c.reltuples::bigint, pg_relation_size(c.oid), pg_indexes_size(c.oid)
	FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
	  AND c.relname IN ('jobs', 'job_attempts', 'job_events', 'holds', 'webhook_outbox', 'buyers', 'devices')
	ORDER BY 1`

func tableSizes(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) ([]TableSize, error) {
	rows, err := q.Query(ctx, sqlTableSizes)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[TableSize])
}

// historyFigures lines every figure up across the points (points[0] is the
// empty database).
func historyFigures(points []HistoryPoint) []HistoryFigure {
	type fig struct {
		name, unit string
		latency    bool
		at         func(HistoryPoint) float64
	}
	figs := []fig{
		{"lease p50", "ms", true, func(p HistoryPoint) float64 { return p.Lease.P50ms }},
		{"lease p99", "ms", true, func(p HistoryPoint) float64 { return p.Lease.P99ms }},
		{"commit p50", "ms", true, func(p HistoryPoint) float64 { return p.Commit.P50ms }},
		{"commit p99", "ms", true, func(p HistoryPoint) float64 { return p.Commit.P99ms }},
		{"jobs/s", "1/s", false, func(p HistoryPoint) float64 { return p.JobsPerS }},
		{"sweep pass p50", "ms", true, func(p HistoryPoint) float64 { return p.Sweep.P50ms }},
		{"scrape p50", "ms", true, func(p HistoryPoint) float64 { return p.Scrape.P50ms }},
		{"scrape p99", "ms", false, func(p HistoryPoint) float64 { return p.Scrape.P99ms }},
	}
	var pages []string
	for k := range points[0].Pages {
		pages = append(pages, k)
	}
	sort.Strings(pages)
	for _, k := range pages {
		figs = append(figs, fig{k + " p50", "ms", true, func(p HistoryPoint) float64 { return p.Pages[k].P50ms }})
	}
	var out []HistoryFigure
	for _, f := range figs {
		h := HistoryFigure{Name: f.name, Unit: f.unit, Latency: f.latency}
		for _, p := range points {
			h.Values = append(h.Values, f.at(p))
		}
		first, last := h.Values[0], h.Values[len(h.Values)-1]
		if e := points[len(points)-1].Empty; e != nil {
			first = f.at(*e)
			h.EmptyAfter = &first
		}
		switch {
		case f.unit == "1/s" && last > 0:
			h.Ratio = first / last
		case f.unit != "1/s" && first > 0:
			h.Ratio = last / first
		}
		h.Met = h.Ratio <= HistoryGoalRatio
		if f.name == "scrape p99" {
			h.Met = h.Met && last < HistoryGoalScrapeMS
		}
		out = append(out, h)
	}
	return out
}

// write saves the report and its plot into dir.
func (r *HistoryReport) write(dir string) error {
	if dir == "" {
		return errors.New("history bench: no output directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, HistoryReportName), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return writeHistoryPlot(r, filepath.Join(dir, HistoryPlotName))
}

// PrintTable writes the figures side by side, one column per size.
func (r *HistoryReport) PrintTable(w io.Writer) error {
	header := []string{"figure"}
	for _, p := range r.Points {
		header = append(header, "history "+humanCount(p.History))
	}
	header = append(header, "empty, again after", "largest/empty", "goal")
	var rows [][]string
	for _, f := range r.Figures {
		row := []string{f.Name + " (" + f.Unit + ")"}
		for _, v := range f.Values {
			row = append(row, strconv.FormatFloat(v, 'f', 2, 64))
		}
		met := "met"
		if !f.Met {
			met = "MISSED"
		}
		again := "-"
		if f.EmptyAfter != nil {
			again = strconv.FormatFloat(*f.EmptyAfter, 'f', 2, 64)
		}
		row = append(row, again)
		rows = append(rows, append(row, fmt.Sprintf("%.2fx", f.Ratio), met))
	}
	seed := []string{"seed rows/s"}
	for _, p := range r.Points {
		seed = append(seed, fmt.Sprintf("%.0f (%d rows, %.0fs)", p.Seed.RowsPerS, p.Seed.Total, p.Seed.Seconds))
	}
	rows = append(rows, append(seed, "", "", ""))
	for _, t := range []string{"jobs", "job_attempts", "job_events", "holds", "webhook_outbox"} {
		row := []string{t + " heap+index MB"}
		for _, p := range r.Points {
			for _, s := range p.Tables {
				if s.Table == t {
					row = append(row, fmt.Sprintf("%.0f + %.0f", float64(s.HeapBytes)/1e6, float64(s.IndexBytes)/1e6))
				}
			}
		}
		rows = append(rows, append(row, "", "", ""))
	}
	return renderTable(w, header, rows)
}

// humanCount is 0, 100k, 1M, 10M...
func humanCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}
