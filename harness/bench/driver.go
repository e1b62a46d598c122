package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/harness/loadgen"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/gateway"
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

// driver is the buyers and agents of one stack run.
type driver struct {
	cfg Config
	// baseURL is the server's; pool and svc reach its database, for the
	// setup (buyers, devices) and the checks after the load only.
	baseURL string
	pool    *pgxpool.Pool
	svc     *fencing.Service
	// gw is the in-process gateway (its wake-up counters for the idle
	// phase); nil with --client-only, which runs no idle phase.
	gw    *gateway.Gateway
	httpc *http.Client
	rec   recorder
	input []byte // the tiny input every job carries

	buyers  []*client.Client
	devices []loadgen.Device // agents first, then idle sessions
	next    atomic.Uint64

	// fleet is the agents, from the peak phase on.
	fleet       *loadgen.Fleet
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

func newDriver(cfg Config, baseURL string, pool *pgxpool.Pool, svc *fencing.Service) *driver {
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

	t0 = time.Now()
	if err := d.peakPhase(ctx, res); err != nil {
		return fmt.Errorf("peak phase: %w", err)
	}
	phase("peak", t0)
	if err := d.floorRounds(ctx, res, phase); err != nil {
		return err
	}

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
		b, err := client.New(d.baseURL, key, client.WithHTTPClient(d.httpc))
		if err != nil {
			return err
		}
		d.buyers = append(d.buyers, b)
	}
	return d.registerDevices(ctx, d.cfg.Agents+d.cfg.IdleSessions)
}

// registerDevices makes d.devices n new registered device identities.
func (d *driver) registerDevices(ctx context.Context, n int) error {
	d.devices = make([]loadgen.Device, n)
	return loadgen.Parallel(8, n, func(i int) error {
		dev, err := loadgen.NewDevice("rmbench_")
		if err != nil {
			return err
		}
		d.devices[i] = dev
		return dev.Register(ctx, d.svc, "bench-"+strconv.Itoa(i), []string{benchService}, d.cfg.Slots)
	})
}

// submit creates one job through POST /v1/jobs and returns its id and the
// instant the request began.
func (d *driver) submit(ctx context.Context, tag string) (string, time.Time, error) {
	b := d.buyers[d.next.Add(1)%uint64(len(d.buyers))]
	start := time.Now()
	created, err := b.Create(ctx, client.CreateRequest{Service: benchService, Params: map[string]string{"seed": tag},
		Input: d.input, NoIdempotencyKey: true})
	// Timed whenever the server answered, as a refusal's round trip is one too.
	if se := (*client.Error)(nil); err == nil || errors.As(err, &se) {
		d.rec.add(opCreate, time.Since(start))
	}
	if err != nil {
		return "", start, err
	}
	return created.Job.ID, start, nil
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

// closeAll ends every session the driver opened and stops the agents.
func (d *driver) closeAll() {
	if d.fleet != nil {
		d.fleet.Close()
	}
}
