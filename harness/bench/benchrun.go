// Package bench is the load driver behind `rendermac bench`: it starts an
// embedded Postgres and the real control plane (HTTP API, device gateway,
// sweeper, webhooks) in this process, drives it as buyers over HTTP and as
// simulated agents over real WebSockets (deviceclient.Client), holds idle
// sessions from a second process (IdleClients) so that their server side is
// measured alone, and measures throughput, latency, memory and idle wake-ups
// next to a pgbench run of the equivalent
// lease transaction on the same cluster, plus model and differential
// campaign rates. Every phase is bounded in count and time; everything is
// on loopback.
package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/server/controlplane"
	"github.com/rendermac/rendermac/server/gateway"
	"github.com/rendermac/rendermac/server/ratelimit"
	"github.com/rendermac/rendermac/server/store"
)

// Config sizes a run. Zero fields take the defaults of Defaults.
type Config struct {
	// Agents is the number of simulated agents of the peak, latency and
	// progress phases; Slots is each one's slot count.
	Agents, Slots int
	// Jobs is the number of jobs of the peak phase, all submitted up front.
	Jobs int
	// Duration bounds the latency phase (submission window); the progress
	// phase runs for half of it.
	Duration time.Duration
	// IdleSessions is how many idle sessions the memory phase holds.
	IdleSessions int
	// IdleClientCommand runs the memory phase's client process: argv of a
	// command that runs IdleClients on its stdin and stdout (`rendermac
	// bench --idle-clients`), so that the sessions' client side is not in
	// the measured process.
	IdleClientCommand []string
	// PgbenchClients and PgbenchSeconds size the pgbench run.
	PgbenchClients, PgbenchSeconds int
	// PgbenchScript is server/fencing/testdata/lease.pgbench; "" looks for it from
	// the working directory upwards.
	PgbenchScript string
	// FloorScript is server/fencing/testdata/job.pgbench, the replay of a job's
	// statement mix; "" looks for it as PgbenchScript's.
	FloorScript string
	// Rounds is how many times the peak runs, each followed by the
	// replay of its mix; the full stack is held to the floor by the median
	// of the rounds' ratios (FloorResult.Ratio).
	Rounds int
	// ModelSeconds and DiffSeconds bound the two campaigns.
	ModelSeconds, DiffSeconds float64
	// TwoProcess also runs the stack phases with the control plane in a
	// `rendermac server` subprocess (Exe), so the load generator's cost is
	// not the server's; see Result.Split.
	TwoProcess bool
	// Exe is the rendermac binary TwoProcess starts ("" : this executable).
	Exe string
	// MetricsURL is the base URL of the server's /metrics when it has a
	// listener of its own ("" : the server's URL); MetricsToken its bearer
	// token ("" : none). Only RunClientOnly's server can have either; the
	// token is sent and never logged.
	MetricsURL, MetricsToken string
	// Log receives progress lines (nil: discarded).
	Log io.Writer

	// skipMemory leaves the idle-session phase out (a separate server's
	// memory is not this process's).
	skipMemory bool
	// serverPID is the two-process server, whose CPU the peak also reads.
	serverPID int
	// serverElsewhere says the control plane is a server this process did
	// not start (--client-only), whose CPU it cannot read.
	serverElsewhere bool
	// stmts reads the stack database's statements around the peak phase
	// (nil: no statement mix).
	stmts *stmtReader
	// floor is the replay each round of the peak is paired with (nil: no
	// floor, one round).
	floor *floorRun
}

// Defaults is what `rendermac bench` runs without flags.
var Defaults = Config{Agents: 100, Slots: 1, Jobs: 2000, Duration: 10 * time.Second, IdleSessions: 10000,
	PgbenchClients: 8, PgbenchSeconds: 5, Rounds: 3, ModelSeconds: 2, DiffSeconds: 5}

func (c *Config) defaults() {
	d := Defaults
	if c.Agents <= 0 {
		c.Agents = d.Agents
	}
	if c.Slots <= 0 {
		c.Slots = d.Slots
	}
	if c.Jobs <= 0 {
		c.Jobs = d.Jobs
	}
	if c.Duration <= 0 {
		c.Duration = d.Duration
	}
	if c.IdleSessions <= 0 {
		c.IdleSessions = d.IdleSessions
	}
	if c.PgbenchClients <= 0 {
		c.PgbenchClients = d.PgbenchClients
	}
	if c.PgbenchSeconds <= 0 {
		c.PgbenchSeconds = d.PgbenchSeconds
	}
	if c.Rounds <= 0 {
		c.Rounds = d.Rounds
	}
	if c.ModelSeconds <= 0 {
		c.ModelSeconds = d.ModelSeconds
	}
	if c.DiffSeconds <= 0 {
		c.DiffSeconds = d.DiffSeconds
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Goals from the issue.
const (
	GoalP99 = 50 * time.Millisecond
	// GoalIdleSessionBytes is the server's heap and stacks per idle
	// session, at GoalIdleSessions of them.
	GoalIdleSessionBytes = 32 << 10
	GoalIdleSessions     = 10000
	GoalModelStepsPerSec = 200_000
	// GoalRatioVsFloor is the full stack's jobs/s over the replay of its
	// own statement mix (issue 32); GoalPostgresMSPerJob Postgres's CPU
	// per job at peak.
	GoalRatioVsFloor     = 0.8
	GoalPostgresMSPerJob = 3.0
	// GoalDiffStepsPerSec and GoalThreeWayStepsPerSec are the campaigns'.
	GoalDiffStepsPerSec     = 2000
	GoalThreeWayStepsPerSec = 800
	// GoalTxPerJob and GoalOutsidePerJob bound a job's happy-path database
	// work: transactions, and statements outside any transaction.
	GoalTxPerJob      = 3
	GoalOutsidePerJob = 1
)

// Result is everything a run measured; it is also the JSON written by
// --json. Rates are per second; latencies in milliseconds.
type Result struct {
	Started    time.Time `json:"started"`
	WallS      float64   `json:"wall_s"`
	GoVersion  string    `json:"go_version"`
	CPUs       int       `json:"cpus"`
	Postgres   string    `json:"postgres"`
	Agents     int       `json:"agents"`
	Slots      int       `json:"slots"`
	Jobs       int       `json:"jobs"`
	ArtifactFS string    `json:"artifact_dir"`

	Peak     PeakResult     `json:"peak"`
	Latency  LatencyResult  `json:"latency"`
	Progress ProgressResult `json:"progress"`
	Memory   MemoryResult   `json:"memory"`
	DB       DBResult       `json:"db_peak"`
	// Mix is the peak phase's statements per job (pg_stat_statements),
	// from the first POST /v1/jobs to the last commit_ok.
	Mix StatementMix `json:"statement_mix"`
	// Floor is that mix replayed by pgbench at the peak's concurrency,
	// and the round-trip limit beside it.
	Floor FloorResult `json:"floor"`
	// Pgbench is the run just before the one-process stack, the reference
	// of its ratios (the two-process stack has its own, SplitResult.Pgbench).
	Pgbench PgbenchResult `json:"pgbench"`
	Model   CampaignRate  `json:"model"`
	Diff    CampaignRate  `json:"differential"`
	// ThreeWay is model, Postgres layer and full stack compared (fuzz
	// --target stack).
	ThreeWay CampaignRate `json:"three_way"`

	// Ops are client-side timings of each operation over all phases.
	Ops []OpStats `json:"ops"`
	// Slowest names the slowest transaction and how it was found.
	Slowest Slowest `json:"slowest"`
	// PhaseS is each phase's wall time.
	PhaseS map[string]float64 `json:"phase_s"`
	// Retries are the service's serialization/deadlock retries by operation
	// over the whole stack run.
	Retries map[string]int64 `json:"retries"`
	// InvariantViolations is SPEC section 4 checked over the stack's rows
	// after the load.
	InvariantViolations int `json:"invariant_violations"`
	// Split is the same stack phases with the server in its own process
	// (Config.TwoProcess, or the whole result of a --client-only run).
	Split *SplitResult `json:"two_process,omitempty"`
}

// SplitResult is the stack phases against a server in another process.
type SplitResult struct {
	Peak                PeakResult     `json:"peak"`
	Latency             LatencyResult  `json:"latency"`
	Progress            ProgressResult `json:"progress"`
	DB                  DBResult       `json:"db_peak"`
	Ops                 []OpStats      `json:"ops"`
	InvariantViolations int            `json:"invariant_violations"`
	// How is how the server ran.
	How string `json:"how"`
	// Pgbench is the run just before this stack (not run by --client-only),
	// the reference of its ratios.
	Pgbench *PgbenchResult `json:"pgbench,omitempty"`
}

// PeakResult is the all-submitted-up-front phase.
type PeakResult struct {
	Jobs          int     `json:"jobs"`
	SubmitPerSec  float64 `json:"submit_per_s"`
	LeasesPerSec  float64 `json:"leases_per_s"`
	CommitsPerSec float64 `json:"commits_per_s"`
	WindowS       float64 `json:"window_s"`
	Rejected      int     `json:"commit_rejected"`
	// CPU is the phase's CPU time per committed job (nil: not measured),
	// from the agents' connecting to the last commit: lease to commit.
	CPU *PeakCPU `json:"cpu,omitempty"`
	// WholeCPU is the same from the first POST /v1/jobs: with each job's
	// create (and the ANALYZE after the submissions), as the replay of the
	// statement mix has it.
	WholeCPU *PeakCPU `json:"cpu_with_create,omitempty"`
	// JobsPerSec is whole jobs: Jobs over the submission's wall time plus
	// the commit window, the rate the replay's jobs/s compares with.
	JobsPerSec float64 `json:"jobs_per_s"`
}

// LatencyResult is the half-peak phase; latency is commit_ok receive time
// minus the instant the buyer began the POST /v1/jobs request.
type LatencyResult struct {
	TargetPerSec float64 `json:"target_per_s"`
	Jobs         int     `json:"jobs"`
	Completed    int     `json:"completed"`
	P50ms        float64 `json:"p50_ms"`
	P90ms        float64 `json:"p90_ms"`
	P99ms        float64 `json:"p99_ms"`
	Maxms        float64 `json:"max_ms"`
	Definition   string  `json:"definition"`
	// StagesP99 is each stage's own p99 over the phase's jobs, Slowest the
	// slowest job's stages: where the tail's time went.
	StagesP99 LatencyStages `json:"stages_p99"`
	Slowest   LatencyStages `json:"slowest_job_stages"`
}

// LatencyStages split a job's submit -> commit_ok.
type LatencyStages struct {
	// PostMS is POST /v1/jobs begun -> answered: the create alone.
	PostMS float64 `json:"post_ms"`
	// ToOfferMS is POST /v1/jobs begun -> lease_offer at the agent: the
	// create, its announcement, the gateway's offer pass and the lease (the
	// offer may arrive before the POST's answer).
	ToOfferMS float64 `json:"submit_to_offer_ms"`
	// WorkMS is lease_offer -> commit sent: progress and the upload.
	WorkMS float64 `json:"offer_to_commit_ms"`
	// CommitMS is commit sent -> commit_ok: tx1, verification, tx2.
	CommitMS float64 `json:"commit_to_ok_ms"`
}

// ProgressResult is the heartbeat phase.
type ProgressResult struct {
	Frames       int64   `json:"progress_ok"`
	WindowS      float64 `json:"window_s"`
	FramesPerSec float64 `json:"frames_per_s"`
	Conflicts    int64   `json:"lease_conflicts"`
}

// MemoryResult is the idle-session phase: the server side of Sessions
// idle sessions whose clients run in another process.
type MemoryResult struct {
	Sessions             int     `json:"sessions"`
	OpenFilesLimit       uint64  `json:"open_files_limit"`
	DialS                float64 `json:"dial_s"`
	HeapInuseDelta       int64   `json:"heap_inuse_delta_bytes"`
	StackInuseDelta      int64   `json:"stack_inuse_delta_bytes"`
	Goroutines           int     `json:"goroutines_delta"`
	GoroutinesPerSession float64 `json:"goroutines_per_session"`
	HeapPerSession       float64 `json:"heap_per_session_bytes"`
	HeapStackPerSession  float64 `json:"heap_plus_stack_per_session_bytes"`
	ServerOnly           bool    `json:"server_only"`
	// The idle window: the gateway's wake-up counters over it, the
	// non-heartbeat ones summed (IdleWakeups), and this process's
	// goroutines created and CPU time meanwhile.
	WindowS               float64         `json:"idle_window_s"`
	Wakeups               gateway.Wakeups `json:"wakeups"`
	IdleWakeups           int64           `json:"idle_wakeups"`
	IdleWakeupsPerSession float64         `json:"idle_wakeups_per_session"`
	GoroutinesCreated     int64           `json:"goroutines_created"`
	CPUms                 float64         `json:"cpu_ms"`
	Note                  string          `json:"note"`
}

// PgbenchResult is the pgbench run of server/fencing/testdata/lease.pgbench.
type PgbenchResult struct {
	Clients int     `json:"clients"`
	Seconds int     `json:"seconds"`
	TPS     float64 `json:"tps"`
	// CPU is the run's CPU time per transaction, read as the stack's is.
	CPU   *PgbenchCPU `json:"cpu,omitempty"`
	Error string      `json:"error,omitempty"`
}

// CampaignRate is a time-boxed campaign.
type CampaignRate struct {
	Seeds      int     `json:"seeds"`
	Steps      int     `json:"steps"`
	Seconds    float64 `json:"seconds"`
	StepsPerS  float64 `json:"steps_per_s"`
	SeqsPerS   float64 `json:"sequences_per_s"`
	Failures   int     `json:"failures"`
	Workers    int     `json:"workers"`
	StepsPerSq int     `json:"steps_per_sequence"`
	// StatementsPerStep is the campaign's statements on every database
	// (pg_stat_statements; BEGIN/COMMIT aside, see StatementMix) per step:
	// its round trips, or more when some are pipelined together.
	StatementsPerStep float64 `json:"statements_per_step,omitempty"`
	// RoundTripsPerStep is the campaign's round trips per step, counted by
	// its pools (store.DBCounter): statements sent alone and pipelined
	// batches, the harness's with the service's.
	RoundTripsPerStep float64 `json:"round_trips_per_step,omitempty"`
	// Select1TPS is pgbench SELECT 1 at Workers clients, run just after:
	// the round-trip limit of this concurrency.
	Select1TPS float64 `json:"select1_tps,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// OpStats is one operation's client-side latency.
type OpStats struct {
	Op    string  `json:"op"`
	Count int     `json:"count"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	Maxms float64 `json:"max_ms"`
	What  string  `json:"what"`
}

// Slowest is the slowest transaction and the method that named it.
type Slowest struct {
	Name   string  `json:"name"`
	P99ms  float64 `json:"p99_ms"`
	Method string  `json:"method"`
}

// Run runs every phase and returns what it measured. A phase that cannot
// run (no pgbench binary, say) is reported in the result, not as an error;
// the error is for a stack that does not work.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	log := cfg.Log
	began := time.Now()
	res := &Result{Started: began.UTC(), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), Agents: cfg.Agents,
		Slots: cfg.Slots, Jobs: cfg.Jobs, PhaseS: map[string]float64{}}
	phase := func(name string, t0 time.Time) {
		res.PhaseS[name] = time.Since(t0).Seconds()
		fmt.Fprintf(log, "bench: %s done in %s\n", name, time.Since(t0).Round(time.Millisecond))
	}

	t0 := time.Now()
	pg, err := pgprovider.Open(ctx, pgprovider.Options{IgnoreEnv: true, DisableDocker: true, Settings: PgSettings})
	if err != nil {
		return nil, err
	}
	defer pg.Close()
	if err := pg.Template(ctx, targets.TemplateName, store.Migrate); err != nil {
		return nil, fmt.Errorf("migrate template: %w", err)
	}
	res.Postgres, _ = pg.Version(ctx)
	dbURL, err := pg.NewDatabase(ctx, targets.TemplateName)
	if err != nil {
		return nil, err
	}
	if cfg.stmts, err = newStmtReader(ctx, pg.AdminURL(), dbURL); err != nil {
		res.Mix.Error = err.Error()
	}
	phase("postgres", t0)

	// Each stack's reference runs just before it: this machine's speed
	// drifts by tens of percent within a minute, and a ratio is only as
	// good as the two figures being measured under the same conditions.
	t0 = time.Now()
	res.Pgbench = runPgbench(ctx, pg, cfg)
	phase("pgbench", t0)
	// The floor's database is ready before the stack starts, so that each
	// round of the peak has its replay right after it (floorRounds).
	stackCfg := cfg
	if fl, err := openFloor(ctx, pg, cfg); err != nil {
		res.Floor = FloorResult{Clients: floorClients(cfg), Seconds: cfg.PgbenchSeconds, Error: err.Error()}
	} else {
		defer fl.close()
		stackCfg.floor = fl
	}
	err = runStack(ctx, stackCfg, dbURL, res, phase)
	if fl := stackCfg.floor; fl != nil {
		res.Floor = fl.res
	}
	if err != nil {
		return res, err
	}
	if cfg.TwoProcess {
		t0 = time.Now()
		pb := runPgbench(ctx, pg, cfg)
		phase("pgbench (two-process)", t0)
		t0 = time.Now()
		dbURL2, err := pg.NewDatabase(ctx, targets.TemplateName)
		if err != nil {
			return res, err
		}
		if res.Split, err = runSplit(ctx, cfg, dbURL2); err != nil {
			return res, fmt.Errorf("two-process stack: %w", err)
		}
		res.Split.Pgbench = &pb
		phase("two-process", t0)
	}

	t0 = time.Now()
	res.Model = modelRate(ctx, cfg.ModelSeconds)
	phase("model", t0)

	t0 = time.Now()
	res.Diff = measured(ctx, pg, cfg, func() CampaignRate { return diffRate(ctx, pg, cfg.DiffSeconds) })
	phase("differential", t0)

	t0 = time.Now()
	res.ThreeWay = measured(ctx, pg, cfg, func() CampaignRate { return threeWayRate(ctx, pg, cfg.DiffSeconds) })
	phase("three-way", t0)

	res.WallS = time.Since(began).Seconds()
	return res, nil
}

// runStack starts the control plane, runs the stack phases against it and
// stops it.
func runStack(ctx context.Context, cfg Config, dbURL string, res *Result, phase func(string, time.Time)) error {
	t0 := time.Now()
	dir, err := artifactDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	res.ArtifactFS = dir
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	plane, err := startPlane(ctx, controlplane.Config{DB: dbURL, Listen: "127.0.0.1:0", Artifacts: dir, SigningKey: key,
		Limits: benchLimits()})
	if err != nil {
		return err
	}
	d := newDriver(cfg, plane.BaseURL, plane.Pool, plane.Service)
	d.gw = plane.Gateway
	err = d.load(ctx, res, phase, t0)
	res.Retries = map[string]int64{}
	for k, v := range plane.Service.Stats().Retries {
		res.Retries[fmt.Sprint(k)] = v
	}
	if serr := plane.stop(); err == nil {
		err = serr
	}
	return err
}

// runningPlane is a control plane running in this process; stop ends it
// (once: later calls return nil).
type runningPlane struct {
	*controlplane.Plane
	stop func() error
}

// startPlane runs the control plane of cfg (its log discarded) until stop
// or ctx's end.
func startPlane(ctx context.Context, cfg controlplane.Config) (*runningPlane, error) {
	cfg.Log = slog.New(slog.DiscardHandler)
	cpCtx, cancel := context.WithCancel(ctx)
	planes := make(chan *controlplane.Plane, 1)
	ran := make(chan error, 1)
	go func() {
		ran <- controlplane.Run(cpCtx, cfg, func(_ context.Context, p *controlplane.Plane) error {
			planes <- p
			return nil
		})
	}()
	var plane *controlplane.Plane
	select {
	case plane = <-planes:
	case err := <-ran:
		cancel()
		return nil, fmt.Errorf("control plane: %w", err)
	case <-time.After(60 * time.Second):
		cancel()
		return nil, errors.New("control plane did not start within 60s")
	}
	var once sync.Once
	var stopErr error
	return &runningPlane{Plane: plane, stop: func() error {
		once.Do(func() {
			cancel()
			select {
			case err := <-ran:
				if err != nil && !errors.Is(err, context.Canceled) {
					stopErr = fmt.Errorf("control plane: %w", err)
				}
			case <-time.After(40 * time.Second):
				stopErr = errors.New("control plane did not stop within 40s")
			}
		})
		return stopErr
	}}, nil
}

// benchLimits are the production defaults but for ConnectsPerIP, which is
// off: every agent and idle session of the bench dials from 127.0.0.1, where
// a deployment's devices come from many addresses.
func benchLimits() ratelimit.Limits {
	return ratelimit.Limits{ConnectsPerIP: ratelimit.Off}
}

// load runs the phases, closes every session and checks SPEC section 4
// over the rows the load left.
func (d *driver) load(ctx context.Context, res *Result, phase func(string, time.Time), t0 time.Time) error {
	defer d.httpc.CloseIdleConnections()
	err := d.run(ctx, res, phase, t0)
	d.closeAll()
	if err != nil {
		return err
	}
	v, err := store.CheckInvariants(ctx, d.pool)
	if err != nil {
		return fmt.Errorf("invariant check: %w", err)
	}
	res.InvariantViolations = len(v)
	if len(v) > 0 {
		return fmt.Errorf("%d invariant violations after the load, first: %v", len(v), v[0])
	}
	return nil
}

// artifactDir is on tmpfs when there is one, as server/fencing/bench_test.go's:
// the store fsyncs every Put, and this benchmark is about the control
// plane, not the disk.
func artifactDir() (string, error) {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "rendermac-bench-"); err == nil {
			return dir, nil
		}
	}
	return os.MkdirTemp("", "rendermac-bench-")
}

// newHTTPClient keeps enough idle loopback connections for the submitters
// and uploaders, so that no request pays a new TCP handshake.
func newHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 512
	tr.MaxIdleConnsPerHost = 512
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}
