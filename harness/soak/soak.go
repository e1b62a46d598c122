// Package soak runs the whole stack under a bounded mixed load with random
// faults injected, then checks that nothing was lost: `rendermac soak`.
//
// The stack is an embedded Postgres cluster (internal/pgprovider) reached
// through a TCP proxy (internal/tcpproxy), one control plane
// (server/controlplane: API, gateway, sweeper, webhook deliverer) on a fixed
// address, buyers over HTTP, agents over WebSockets and a webhook receiver.
// While the load runs, a fault goroutine crashes and restarts Postgres,
// cuts every pooled connection, restarts the control plane, kills agents'
// sessions and makes the webhook receiver fail. Then the load stops, the
// stack drains, and the checks run over the rows left (checks.go).
//
// The seed fixes every random choice: the fault schedule (kind and time),
// the agents' choices (fail, cancel) and the buyers' pacing. It cannot fix
// the interleaving of real goroutines, sockets and a real database, so two
// runs with one seed inject the same faults at the same offsets but need
// not decide the same jobs the same way; a violation's replay command
// reruns that schedule.
package soak

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/harness/loadgen"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/internal/tcpproxy"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/controlplane"
	"github.com/rendermac/rendermac/server/store"
)

// Config sizes a soak. Zero fields take the defaults of Defaults.
type Config struct {
	// Duration is how long load and faults run; the drain and checks
	// come after it.
	Duration time.Duration
	// Seed fixes the fault schedule and every load decision.
	Seed uint64
	// Agents is the number of agents (one slot each).
	Agents int
	// Rate is the jobs submitted per second.
	Rate float64
	// FaultEvery is the mean pause between two faults.
	FaultEvery time.Duration
	// Drain bounds the wait, after the load, for every job to end and
	// every webhook to be delivered.
	Drain time.Duration
	// Progress, when set, is called about once a second with the elapsed
	// time and the counters so far.
	Progress func(elapsed time.Duration, s Stats)
	// Log receives the soak's own lines (nil: discarded); Server receives
	// the control plane's log (nil: discarded).
	Log    io.Writer
	Server *slog.Logger

	// afterChecks, in tests, runs after the checks with the stack still
	// up (to plant damage and check that the checks see it).
	afterChecks func(context.Context, *stack)
}

// Defaults is what `rendermac soak` runs without flags.
var Defaults = Config{Duration: time.Minute, Seed: 1, Agents: 8, Rate: 8, FaultEvery: 4 * time.Second,
	Drain: 2 * time.Minute}

func (c *Config) defaults() {
	d := Defaults
	if c.Duration <= 0 {
		c.Duration = d.Duration
	}
	if c.Agents <= 0 {
		c.Agents = d.Agents
	}
	if c.Rate <= 0 {
		c.Rate = d.Rate
	}
	if c.FaultEvery <= 0 {
		c.FaultEvery = d.FaultEvery
	}
	if c.Drain <= 0 {
		c.Drain = d.Drain
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Server == nil {
		c.Server = slog.New(slog.DiscardHandler)
	}
}

// Timings of the stack under soak: short, so that expiries, sweeps and
// retries happen many times within a run.
const (
	leaseTTL      = 4 * time.Second
	heartbeat     = time.Second
	sweepInterval = 500 * time.Millisecond
	pollInterval  = 500 * time.Millisecond
	service       = "synthetic.mp4"
	buyers        = 4
	buyerCents    = 1 << 40
)

// Stats are the load's counters.
type Stats struct {
	Submitted, Accepted, Refused int64
	Commits, Fails, Cancels      int64
	Faults                       int64
}

// stack is the running system under soak and everything the load shares.
type stack struct {
	cfg    Config
	pg     *pgprovider.Provider
	dbURL  string // direct, for the observer
	proxy  *tcpproxy.Proxy
	obs    *pgxpool.Pool
	hook   *Receiver
	key    []byte
	dir    string
	addr   string // the control plane's fixed listen address
	base   string
	httpc  *http.Client
	buyers []*client.Client
	fleet  *loadgen.Fleet
	// choosers are the agents' seeded choices, by agent index.
	choosers []*chooser

	planeMu   sync.Mutex
	plane     *controlplane.Plane
	planeStop context.CancelFunc
	planeDone chan error

	accepted AcceptedJobs

	submitted, refused      atomic.Int64
	commits, fails, cancels atomic.Int64
	faults                  FaultCounts
}

func (s *stack) stats() Stats {
	return Stats{Submitted: s.submitted.Load(), Accepted: s.accepted.Count(), Refused: s.refused.Load(),
		Commits: s.commits.Load(), Fails: s.fails.Load(), Cancels: s.cancels.Load(), Faults: s.faults.Total()}
}

// Run runs one soak and returns its report. The error is for a stack that
// could not be set up or drained; violations are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	began := time.Now()
	s := &stack{cfg: cfg, httpc: &http.Client{Timeout: 15 * time.Second}}
	defer s.httpc.CloseIdleConnections()
	if err := s.setup(ctx); err != nil {
		s.close()
		return nil, err
	}
	defer s.close()
	fmt.Fprintf(cfg.Log, "soak: stack up in %s (seed %d, %d agents, %.1f jobs/s, a fault every ~%s)\n",
		time.Since(began).Round(time.Millisecond), cfg.Seed, cfg.Agents, cfg.Rate, cfg.FaultEvery)

	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	defer s.fleet.Stop()
	if err := s.fleet.Start(ctx); err != nil {
		return nil, err
	}
	var loadWG sync.WaitGroup
	loadWG.Go(func() { s.submit(loadCtx) })
	loadWG.Go(func() { s.injectFaults(loadCtx) })
	t0 := time.Now()
	if cfg.Progress != nil {
		loadWG.Go(func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-loadCtx.Done():
					return
				case <-t.C:
					cfg.Progress(time.Since(t0), s.stats())
				}
			}
		})
	}
	loadWG.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Log, "soak: load done (%+v); draining\n", s.stats())

	// Drain: the stack whole again, agents still serving, until every job
	// has ended and every webhook is delivered.
	if err := s.heal(ctx); err != nil {
		return nil, fmt.Errorf("drain: %w", err)
	}
	drained, derr := s.drain(ctx, cfg.Drain)
	s.fleet.Stop()
	rep := &Report{Seed: cfg.Seed, Duration: cfg.Duration, Agents: cfg.Agents, Rate: cfg.Rate,
		Stats: s.stats(), Faults: s.faults.snapshot(), Drained: drained}
	if derr != nil {
		return nil, fmt.Errorf("drain: %w", derr)
	}
	if err := s.check(ctx, rep); err != nil {
		return nil, err
	}
	if cfg.afterChecks != nil {
		cfg.afterChecks(ctx, s)
	}
	s.stopPlane()
	rep.Wall = time.Since(began)
	return rep, nil
}

func (s *stack) setup(ctx context.Context) error {
	pg, err := pgprovider.Open(ctx, pgprovider.Options{IgnoreEnv: true, DisableDocker: true})
	if err != nil {
		return err
	}
	s.pg = pg
	if pg.Kind() != "local" {
		return fmt.Errorf("soak needs a local Postgres cluster it can crash, got %s", pg.Kind())
	}
	if err := pg.Template(ctx, targets.TemplateName, store.Migrate); err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	if s.dbURL, err = pg.NewDatabase(ctx, targets.TemplateName); err != nil {
		return err
	}
	u, err := url.Parse(s.dbURL)
	if err != nil {
		return fmt.Errorf("database url: %w", err)
	}
	if s.proxy, err = tcpproxy.New(u.Host); err != nil {
		return err
	}
	if s.obs, err = store.OpenPool(ctx, s.dbURL); err != nil {
		return err
	}
	if s.dir, err = os.MkdirTemp("", "rendermac-soak-"); err != nil {
		return err
	}
	s.key = make([]byte, 32)
	if _, err := rand.Read(s.key); err != nil {
		return err
	}
	s.hook = NewReceiver(s.key)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.addr = ln.Addr().String()
	_ = ln.Close()
	s.base = "http://" + s.addr
	if err := s.startPlane(ctx); err != nil {
		return err
	}
	return s.seed(ctx)
}

// seed creates the buyers (API key, webhook URL) and the agents' devices.
func (s *stack) seed(ctx context.Context) error {
	s.planeMu.Lock()
	svc := s.plane.Service
	s.planeMu.Unlock()
	for i := range buyers {
		id := protocol.UUIDFrom(rand.Reader)
		if err := svc.CreateBuyer(ctx, id, fmt.Sprintf("soak buyer %d", i), buyerCents); err != nil {
			return err
		}
		key, err := api.CreateAPIKey(ctx, s.obs, id)
		if err != nil {
			return err
		}
		if err := api.SetWebhookURL(ctx, s.obs, id, s.hook.URL(id)); err != nil {
			return err
		}
		b, err := client.New(s.base, key, client.WithHTTPClient(s.httpc))
		if err != nil {
			return err
		}
		s.buyers = append(s.buyers, b)
	}
	var devices []loadgen.Device
	for i := range s.cfg.Agents {
		dev, err := loadgen.NewDevice("rmsoak_")
		if err != nil {
			return err
		}
		if err := dev.Register(ctx, svc, fmt.Sprintf("soak-%d", i), []string{service}, 1); err != nil {
			return err
		}
		devices = append(devices, dev)
		s.choosers = append(s.choosers, &chooser{rng: mrand.New(mrand.NewPCG(s.cfg.Seed, 100+uint64(i)))})
	}
	s.fleet = s.newFleet(devices)
	return nil
}

// startPlane starts the control plane on s.addr through the proxy and
// waits until it serves; a Postgres that is down makes it retry.
func (s *stack) startPlane(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := s.tryStartPlane(ctx)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		fmt.Fprintf(s.cfg.Log, "soak: control plane did not start (%v); again\n", err)
		time.Sleep(300 * time.Millisecond)
	}
}

func (s *stack) tryStartPlane(ctx context.Context) error {
	s.planeMu.Lock()
	defer s.planeMu.Unlock()
	u, _ := url.Parse(s.dbURL)
	u.Host = s.proxy.Addr()
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	ready := make(chan struct{})
	var plane *controlplane.Plane
	go func() {
		done <- controlplane.Run(runCtx, controlplane.Config{DB: u.String(), Listen: s.addr, Artifacts: s.dir,
			SigningKey: s.key, LeaseTTL: leaseTTL, Heartbeat: heartbeat, SweepInterval: sweepInterval,
			PollInterval: pollInterval, Log: s.cfg.Server},
			func(_ context.Context, p *controlplane.Plane) error { plane = p; close(ready); return nil })
	}()
	select {
	case <-ready:
		s.planeStop, s.planeDone, s.plane = stop, done, plane
		return nil
	case err := <-done:
		stop()
		return fmt.Errorf("control plane: %w", err)
	case <-time.After(time.Minute):
		stop()
		return errors.New("control plane did not start within a minute")
	}
}

// stopPlane shuts the control plane down gracefully (sessions drain).
func (s *stack) stopPlane() {
	s.planeMu.Lock()
	defer s.planeMu.Unlock()
	if s.planeStop == nil {
		return
	}
	s.planeStop()
	<-s.planeDone
	s.planeStop, s.planeDone = nil, nil
}

func (s *stack) close() {
	s.stopPlane()
	if s.hook != nil {
		s.hook.Close()
	}
	if s.obs != nil {
		s.obs.Close()
	}
	if s.proxy != nil {
		s.proxy.Close()
	}
	if s.pg != nil {
		_ = s.pg.Close()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// heal makes the stack whole after the load: Postgres up, control plane
// running, webhook receiver answering.
func (s *stack) heal(ctx context.Context) error {
	s.hook.failing.Store(false)
	if err := s.pg.Start(ctx); err != nil {
		return err
	}
	s.planeMu.Lock()
	running := s.planeStop != nil
	s.planeMu.Unlock()
	if !running {
		return s.startPlane(ctx)
	}
	return nil
}

// drain waits until no job is live and no webhook is pending, or d passes;
// it reports whether everything settled.
func (s *stack) drain(ctx context.Context, d time.Duration) (bool, error) {
	return Drain(ctx, s.obs, d, s.cfg.Log)
}

// Drain waits until db has no live job and no pending webhook, or d
// passes; it reports whether everything settled, and says on log what was
// left when it did not.
func Drain(ctx context.Context, db *pgxpool.Pool, d time.Duration, log io.Writer) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		var live, pending int
		err := db.QueryRow(ctx, `SELECT
		    (SELECT count(*) FROM jobs WHERE status NOT IN ('succeeded', 'cancelled', 'failed')),
		    (SELECT count(*) FROM webhook_outbox WHERE delivered_at IS NULL)`).Scan(&live, &pending)
		if err != nil {
			return false, fmt.Errorf("count live jobs: %w", err)
		}
		if live == 0 && pending == 0 {
			return true, nil
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(log, "drain ran out with %d live jobs and %d pending webhooks\n", live, pending)
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
