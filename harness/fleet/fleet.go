package fleet

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/agent"
	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/harness/soak"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/localserver"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/internal/s3provider"
	"github.com/rendermac/rendermac/internal/tcpproxy"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// Config sizes a fleet run. Zero fields take Defaults'.
type Config struct {
	// Bin is the rendermac binary the servers and agents run (required).
	Bin string
	// Duration is how long load and faults run at least (longer when the
	// first round of fault kinds, each kind once, takes longer); the drain
	// comes after.
	Duration time.Duration
	// Seed fixes the fault schedule and every load decision.
	Seed uint64
	// Agents and Gateways count the processes.
	Agents, Gateways int
	// Rate is jobs submitted per second.
	Rate float64
	// FaultEvery is the mean pause between two faults.
	FaultEvery time.Duration
	// DrainBound is how long the queue may take to drain after the last
	// fault healed; longer is a violation.
	DrainBound time.Duration
	// FFmpegPercent is the share of jobs rendered by FFmpeg, where ffmpeg
	// runs (0: none).
	FFmpegPercent int
	// Store is the gateways' artifact store: StoreAuto (""), StoreFS or
	// StoreS3; only S3 has the object-store outage fault.
	Store string
	// Postgres is the gateways' database: PostgresLocal ("") or
	// PostgresPatroni; PGVariant ("" or PGVariantAsyncHoldback) breaks
	// the Patroni cluster on purpose, and the run must then fail.
	Postgres, PGVariant string
	// AgentVariant runs every agent as a broken variant (a -tags mutations
	// binary only); the run must then fail.
	AgentVariant string
	// Log receives progress lines (nil: discarded).
	Log io.Writer
	// Keep keeps the run directory (process logs) after the run;
	// KeepOnFailure keeps it only when a check found a violation
	// (Report.Dir names it).
	Keep, KeepOnFailure bool
}

// Defaults is what `rendermac fleet` runs without flags.
var Defaults = Config{Duration: time.Minute, Seed: 1, Agents: 4, Gateways: 2, Rate: 3,
	FaultEvery: 3 * time.Second, DrainBound: 90 * time.Second, FFmpegPercent: 10}

func (c *Config) defaults() {
	d := Defaults
	if c.Duration <= 0 {
		c.Duration = d.Duration
	}
	if c.Agents <= 0 {
		c.Agents = d.Agents
	}
	if c.Gateways <= 0 {
		c.Gateways = d.Gateways
	}
	if c.Rate <= 0 {
		c.Rate = d.Rate
	}
	if c.FaultEvery <= 0 {
		c.FaultEvery = d.FaultEvery
	}
	if c.DrainBound <= 0 {
		c.DrainBound = d.DrainBound
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Store == "" {
		c.Store = StoreAuto
	}
	if c.Postgres == "" {
		c.Postgres = PostgresLocal
	}
}

// Timings of the fleet: a short lease so that sleeps and losses expire
// leases many times in a run, and the agent's ping capped by it.
const (
	leaseTTL     = 3 * time.Second
	heartbeat    = time.Second
	pingInterval = time.Second
	pingTimeout  = time.Second
	buyers       = 4
	buyerCents   = 1 << 40
	// tmpfsBytes is each agent's work dir where a tmpfs can be mounted;
	// minFreeMB is the agent's --min-free-mb.
	tmpfsBytes = 48 << 20
	minFreeMB  = 8
)

// ReconnectBound is how long after a Wi-Fi loss heals an agent must have a
// new connection: its dead-connection bound, a handshake that was in flight
// when the path died (it hangs until the handshake timeout), the longest
// backoff (agent.DefaultBackoffMax, failures pile up while the network is
// down) and the handshake that then succeeds. Without the in-flight
// handshake the bound was 42 s, and a 10-minute run on a loaded host
// missed it by 15 ms with exactly that sequence (a handshake timed out
// after the heal, then a 20 s backoff).
func ReconnectBound() time.Duration {
	return agent.DeadConnectionBound(agent.Config{PingInterval: pingInterval, PingTimeout: pingTimeout}, leaseTTL) +
		handshakeTimeout + agent.DefaultBackoffMax + handshakeTimeout
}

// handshakeTimeout is the agent's bound on one WebSocket handshake.
const handshakeTimeout = 10 * time.Second

type run struct {
	cfg     Config
	dir     string
	pg      *pgprovider.Provider
	pat     *patroniState // the Patroni cluster (Config.Postgres patroni), else nil
	dbURL   string
	obs     *pgxpool.Pool
	hook    *soak.Receiver
	key     []byte
	keyFile string
	arts    string
	// store is the store the run gives its gateways (StoreFS or StoreS3),
	// storeNote why StoreAuto fell back to the filesystem; s3 and bucket
	// are the S3 server and its bucket.
	store     string
	storeNote string
	s3        *s3provider.Server
	bucket    string
	// children records every child's pid for a later run's cleanStale.
	children *childLog
	gws      []*gateway
	agents   []*agentProc
	buyers   []*client.Client
	httpc    *http.Client
	tls      fleetTLS
	ffmpeg   bool
	tmpfsOK  bool
	faults   soak.FaultCounts
	lastHeal atomic.Int64 // unix nanos of the last fault's end

	accepted   soak.AcceptedJobs
	mu         sync.Mutex
	violations []string // found while running (Wi-Fi reconnects)

	submitted, refused, cancels atomic.Int64
}

// Run runs one fleet campaign and returns its report. The error is for a
// run that could not be set up; violations are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if cfg.Bin == "" {
		return nil, errors.New("fleet: Config.Bin (the rendermac binary) is required")
	}
	if err := cfg.checkPostgres(); err != nil {
		return nil, err
	}
	began := time.Now()
	r := &run{cfg: cfg, httpc: &http.Client{Timeout: 15 * time.Second}}
	defer r.httpc.CloseIdleConnections()
	defer r.close()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Log, "fleet: %d gateways, %d agents up in %s (seed %d, %s store, tmpfs work dirs %v, ffmpeg %v, dir %s)\n",
		cfg.Gateways, cfg.Agents, time.Since(began).Round(time.Millisecond), cfg.Seed, r.store, r.tmpfsOK, r.ffmpeg, r.dir)

	// The load runs while the faults do: Duration, and longer if the first
	// round of fault kinds is not over by then (see injectFaults).
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	wg.Go(func() { r.submit(loadCtx) })
	loadStart := time.Now()
	r.injectFaults(ctx, loadStart)
	stopLoad()
	wg.Wait()
	loadTime := time.Since(loadStart)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Heal whatever is still down, then time the drain from there.
	if err := r.heal(ctx); err != nil {
		return nil, fmt.Errorf("heal: %w", err)
	}
	healed := time.Now()
	if t := r.lastHeal.Load(); t > 0 && time.Unix(0, t).After(healed) {
		healed = time.Unix(0, t)
	}
	drained, err := r.drain(ctx, cfg.DrainBound+30*time.Second)
	if err != nil {
		return nil, err
	}
	drainTime := time.Since(healed)
	for _, a := range r.agents {
		a.stop(5 * time.Second)
	}
	rep := &Report{Seed: cfg.Seed, Duration: cfg.Duration, LoadTime: loadTime, Agents: cfg.Agents, Gateways: cfg.Gateways, Rate: cfg.Rate,
		Variant: cfg.AgentVariant, Drained: drained, DrainTime: drainTime, DrainBound: cfg.DrainBound,
		Faults: r.faults.Counts(FaultKinds()), TmpfsDisks: r.tmpfsOK, FFmpeg: r.ffmpeg, Store: r.store, StoreNote: r.storeNote, Transport: Transport,
		Submitted: r.submitted.Load(), Accepted: r.accepted.Count(), Refused: r.refused.Load(), Cancels: r.cancels.Load()}
	rep.Soak.Stats.Faults = r.faults.Total()
	rep.Postgres, rep.PGVariant, rep.Began = cfg.Postgres, cfg.PGVariant, loadStart
	if rep.PrimaryLosses, err = r.primaryLosses(ctx); err != nil {
		return nil, err
	}
	st, err := r.checkStore(ctx)
	if err != nil {
		return nil, err
	}
	if err := soak.RunChecks(ctx, soak.CheckEnv{DB: r.obs, Hook: r.hook, ArtifactDir: r.arts, Store: st,
		Accepted: r.accepted.IDs(), Buyers: buyers}, &rep.Soak); err != nil {
		return nil, err
	}
	if err := r.check(ctx, rep); err != nil {
		return nil, err
	}
	if cfg.KeepOnFailure && rep.Violations() > 0 {
		r.cfg.Keep = true
	}
	if r.cfg.Keep {
		rep.Dir = r.dir
	}
	rep.Wall = time.Since(began)
	return rep, nil
}

func (r *run) setup(ctx context.Context) error {
	cleanStale(os.TempDir(), r.cfg.Bin, r.cfg.Log)
	var err error
	if r.dir, err = os.MkdirTemp("", strings.TrimSuffix(runDirPattern, "*")); err != nil {
		return err
	}
	if r.children, err = markLive(r.dir); err != nil {
		return err
	}
	r.arts = filepath.Join(r.dir, "artifacts")
	if err := r.openStore(ctx); err != nil {
		return err
	}
	if err := r.openPostgres(ctx); err != nil {
		return err
	}
	if r.obs, err = store.OpenPool(ctx, r.dbURL); err != nil {
		return err
	}
	r.key = make([]byte, 32)
	if _, err := rand.Read(r.key); err != nil {
		return err
	}
	r.keyFile = filepath.Join(r.dir, "signing.key")
	if err := os.WriteFile(r.keyFile, r.key, 0o600); err != nil {
		return err
	}
	r.hook = soak.NewReceiver(r.key)
	_, ferr := exec.LookPath("ffmpeg")
	r.ffmpeg = ferr == nil && r.cfg.FFmpegPercent > 0
	storeArgs, storeEnv := r.gatewayStore()
	if err := r.setupTLS(); err != nil {
		return err
	}
	storeArgs = append(storeArgs, r.gatewayTLSArgs()...)
	for i := range r.cfg.Gateways {
		addr, err := localserver.FreeAddr()
		if err != nil {
			return err
		}
		g := &gateway{addr: addr, proc: proc{name: fmt.Sprintf("gateway-%d", i), bin: r.cfg.Bin, env: storeEnv, children: r.children,
			log: filepath.Join(r.dir, fmt.Sprintf("gateway-%d.log", i)),
			args: append(append([]string{"server", "--db", r.dbURL, "--listen", addr, "--public-url", "https://" + addr},
				storeArgs...), "--signing-key-file", r.keyFile, "--log-level", "warn",
				"--lease-ttl", leaseTTL.String(), "--heartbeat", heartbeat.String(),
				"--limit-pair-per-ip", "off", "--limit-auth-failures-per-ip", "off", "--limit-jobs-per-buyer", "off",
				"--limit-connects-per-ip", "off", "--limit-connects-per-device", "off")}}
		if err := g.start(); err != nil {
			return err
		}
		r.gws = append(r.gws, g)
	}
	for _, g := range r.gws {
		if err := r.waitReady(ctx, g.url(), time.Minute); err != nil {
			return fmt.Errorf("%s: %w (log %s)", g.name, err, g.log)
		}
	}
	if err := r.seedBuyers(ctx); err != nil {
		return err
	}
	for i := range r.cfg.Agents {
		if err := r.startAgent(ctx, i); err != nil {
			return err
		}
	}
	return r.awaitAgentsOnline(ctx)
}

// openPostgres starts the run's Postgres (Config.Postgres) and sets
// r.dbURL to a migrated database on it.
func (r *run) openPostgres(ctx context.Context) error {
	if r.cfg.Postgres == PostgresPatroni {
		return r.openPatroni(ctx)
	}
	var err error
	if r.pg, err = pgprovider.Open(ctx, pgprovider.Options{IgnoreEnv: true, DisableDocker: true}); err != nil {
		return err
	}
	if r.pg.Kind() != "local" {
		return fmt.Errorf("fleet needs a local Postgres cluster it can crash, got %s", r.pg.Kind())
	}
	if err := r.pg.Template(ctx, targets.TemplateName, store.Migrate); err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	r.dbURL, err = r.pg.NewDatabase(ctx, targets.TemplateName)
	return err
}

// checkPostgres refuses an unknown Postgres or variant.
func (c *Config) checkPostgres() error {
	switch {
	case !slices.Contains(Postgreses(), c.Postgres):
		return fmt.Errorf("fleet: postgres %q: want one of %v", c.Postgres, Postgreses())
	case !slices.Contains(PGVariants(), c.PGVariant):
		return fmt.Errorf("fleet: postgres variant %q: want one of %v", c.PGVariant, PGVariants()[1:])
	case c.PGVariant != "" && c.Postgres != PostgresPatroni:
		return fmt.Errorf("fleet: postgres variant %s needs the Patroni cluster (postgres %s)", c.PGVariant, PostgresPatroni)
	}
	return nil
}

func (r *run) seedBuyers(ctx context.Context) error {
	svc := fencing.NewService(r.obs, nil, protocol.RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader}, fencing.Config{})
	for i := range buyers {
		id := protocol.UUIDFrom(rand.Reader)
		if err := svc.CreateBuyer(ctx, id, fmt.Sprintf("fleet buyer %d", i), buyerCents); err != nil {
			return err
		}
		if err := api.SetWebhookURL(ctx, r.obs, id, r.hook.URL(id)); err != nil {
			return err
		}
		key, err := api.CreateAPIKey(ctx, r.obs, id)
		if err != nil {
			return err
		}
		// No URL yet: every call picks a gateway (client.At).
		b, err := client.New("http://gateway.invalid", key, client.WithHTTPClient(r.httpc))
		if err != nil {
			return err
		}
		r.buyers = append(r.buyers, b)
	}
	return nil
}

// startAgent pairs agent i with a fresh pairing code through its own path
// to the first gateway, and starts it.
func (r *run) startAgent(ctx context.Context, i int) error {
	a := &agentProc{idx: i, work: filepath.Join(r.dir, fmt.Sprintf("agent-%d-work", i))}
	if err := os.MkdirAll(a.work, 0o700); err != nil {
		return err
	}
	a.tmpfs = mountTmpfs(a.work, tmpfsBytes)
	if i == 0 {
		r.tmpfsOK = a.tmpfs
	}
	r.tmpfsOK = r.tmpfsOK && a.tmpfs
	var urls []string
	for _, g := range r.gws {
		p, err := tcpproxy.New(g.addr)
		if err != nil {
			return err
		}
		a.paths = append(a.paths, p)
		urls = append(urls, "https://"+p.Addr())
	}
	code, _, err := api.CreatePairingCode(ctx, r.obs, time.Time{}, 10*time.Minute)
	if err != nil {
		return err
	}
	services := runnerServices(r.ffmpeg)
	a.proc = proc{name: fmt.Sprintf("agent-%d", i), bin: r.cfg.Bin, children: r.children, log: filepath.Join(r.dir, fmt.Sprintf("agent-%d.log", i)),
		args: []string{"agent", "--server", urls[0], "--failover", strings.Join(urls[1:], ","), "--pair", code,
			"--token-file", filepath.Join(r.dir, fmt.Sprintf("agent-%d-device.json", i)), "--name", fmt.Sprintf("fleet-mac-%d", i),
			"--services", strings.Join(services, ","), "--slots", "2", "--work", a.work,
			"--min-free-mb", strconv.Itoa(minFreeMB), "--ping-interval", pingInterval.String(), "--ping-timeout", pingTimeout.String(),
			"--log-format", "json", "--log-level", "debug", "--ca-file", r.tls.caFile}}
	if r.cfg.AgentVariant != "" {
		a.env = []string{"RENDERMAC_AGENT_VARIANT=" + r.cfg.AgentVariant}
	}
	if err := a.start(); err != nil {
		return err
	}
	r.agents = append(r.agents, a)
	return nil
}

func runnerServices(ffmpeg bool) []string {
	if ffmpeg {
		return []string{"synthetic.mp4", "ffmpeg.h264_720p"}
	}
	return []string{"synthetic.mp4"}
}

// awaitAgentsOnline waits until every agent's device is online; an agent
// that exits meanwhile ends the wait with its log's last line.
func (r *run) awaitAgentsOnline(ctx context.Context) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var n int
		if err := r.obs.QueryRow(ctx, `SELECT count(*) FROM devices WHERE status = 'online'`).Scan(&n); err != nil {
			return err
		}
		if n >= r.cfg.Agents {
			return nil
		}
		for _, a := range r.agents {
			if a.exited() {
				return fmt.Errorf("%s exited at start: %s (logs in %s)", a.name, lastLine(a.log), r.dir)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d agents came online within 3 minutes (logs in %s)", n, r.cfg.Agents, r.dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (r *run) close() {
	for _, a := range r.agents {
		a.kill()
		for _, p := range a.paths {
			p.Close()
		}
		if a.tmpfs {
			unmount(a.work)
		}
	}
	for _, g := range r.gws {
		g.stop(5 * time.Second)
	}
	if r.hook != nil {
		r.hook.Close()
	}
	if r.obs != nil {
		r.obs.Close()
	}
	if r.pg != nil {
		_ = r.pg.Close()
	}
	if r.pat != nil {
		_ = r.pat.cluster.Close()
	}
	if r.s3 != nil {
		_ = r.s3.Close()
	}
	if r.dir != "" && !r.cfg.Keep {
		_ = os.RemoveAll(r.dir)
	} else if r.dir != "" {
		_ = os.Remove(filepath.Join(r.dir, harnessFile)) // kept, not stale
	}
}

// submit is the buyers' load: a job every 1/Rate on average, a seeded mix
// of synthetic renders (some slow enough to be cancelled or to outlive a
// lease) and FFmpeg renders; a share is cancelled while it runs. A request
// goes to the gateways in turn until one answers (the Idempotency-Key makes
// a retry safe).
func (r *run) submit(ctx context.Context) {
	rng := mrand.New(mrand.NewPCG(r.cfg.Seed, 2))
	gap := time.Duration(float64(time.Second) / r.cfg.Rate)
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := 0; ; n++ {
		pause := time.Duration(float64(gap) * (0.5 + rng.Float64()))
		req := client.CreateRequest{Service: "synthetic.mp4", MaxAttempts: new(6),
			IdempotencyKey: fmt.Sprintf("fleet-%d-%d", r.cfg.Seed, n),
			Params: map[string]string{"seed": strconv.Itoa(n), "delay_ms": strconv.Itoa(200 + rng.IntN(2500)),
				"mdat_bytes": strconv.Itoa(256<<10 + rng.IntN(2<<20))}}
		if r.ffmpeg && rng.IntN(100) < r.cfg.FFmpegPercent {
			req.Service = "ffmpeg.h264_720p"
			req.Params = map[string]string{"duration_s": "1", "preset": "fast", "crf": "35"}
		}
		cancelIt := rng.IntN(100) < 12
		cancelAfter := time.Duration(rng.IntN(2000)) * time.Millisecond
		b := r.buyers[n%len(r.buyers)]
		first := rng.IntN(len(r.gws))
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		wg.Go(func() {
			r.submitted.Add(1)
			var id string
			r.eachGateway(first, func(base string) bool {
				bb, err := b.At(base)
				if err != nil {
					return false
				}
				created, err := bb.Create(ctx, req)
				id = created.Job.ID
				return err == nil
			})
			if id == "" {
				r.refused.Add(1)
				return
			}
			r.accepted.Add(id)
			if !cancelIt {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(cancelAfter):
			}
			r.eachGateway(first+1, func(base string) bool {
				bb, err := b.At(base)
				if err != nil {
					return false
				}
				if _, err = bb.Cancel(context.WithoutCancel(ctx), id); err == nil {
					r.cancels.Add(1)
				}
				var se *client.Error
				return err == nil || errors.As(err, &se)
			})
		})
	}
}

// eachGateway calls try with each gateway's URL from first on until it
// returns true.
func (r *run) eachGateway(first int, try func(base string) bool) {
	for k := range r.gws {
		if try(r.gws[(first+k)%len(r.gws)].url()) {
			return
		}
	}
}

func (r *run) violation(format string, args ...any) {
	r.mu.Lock()
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// heal makes the stack whole: Postgres up, every gateway running, every
// agent awake on an open path with its disk free.
func (r *run) heal(ctx context.Context) error {
	if err := r.healPostgres(ctx); err != nil {
		return err
	}
	if r.s3 != nil {
		if err := r.s3.Start(ctx); err != nil {
			return err
		}
	}
	for _, g := range r.gws {
		g.mu.Lock()
		down := g.cmd == nil
		g.mu.Unlock()
		if down {
			if err := g.start(); err != nil {
				return err
			}
		}
		if err := r.waitReady(ctx, g.url(), time.Minute); err != nil {
			return err
		}
	}
	for _, a := range r.agents {
		a.signal(syscallSIGCONT)
		for _, p := range a.paths {
			p.Heal()
		}
		_ = os.Remove(filepath.Join(a.work, "ballast"))
	}
	return nil
}

// healPostgres starts what is down: the local cluster, or every Patroni
// node, then waits for the Patroni cluster to be whole.
func (r *run) healPostgres(ctx context.Context) error {
	if r.pat == nil {
		return r.pg.Start(ctx)
	}
	for _, i := range r.pat.cluster.Down() {
		if err := r.pat.cluster.StartNode(i); err != nil {
			return err
		}
	}
	return r.awaitHealthy(ctx)
}

// drain waits until no job is live and no webhook is pending, or d passes.
func (r *run) drain(ctx context.Context, d time.Duration) (bool, error) {
	return soak.Drain(ctx, r.obs, d, r.cfg.Log)
}
