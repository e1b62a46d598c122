package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/internal/pgtest"
	"github.com/rendermac/rendermac/internal/syncbuf"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/faultpoint"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/metrics"
	"github.com/rendermac/rendermac/server/store"
)

// TestMain stops the shared Postgres cluster and then checks for leaked
// goroutines: every session, worker and loop must be gone.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, nil)) }

const (
	templateName = "rendermac_gateway"
	buyerID      = "00000000-0000-4000-8000-0000000000b1"
	device1      = "00000000-0000-4000-8000-0000000000d1"
	device2      = "00000000-0000-4000-8000-0000000000d2"
	revokedDev   = "00000000-0000-4000-8000-0000000000d3"
	token1       = "device-token-one"
	token2       = "device-token-two"
	tokenRevoked = "device-token-revoked"
	inputSHA     = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
	service      = "synthetic.mp4"
	ttl          = 30 * time.Second
)

var (
	services = []string{service}
	// t0 is the pinned clock's origin; stub-clock tests never read the wall clock.
	t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
)

// bundle is one gateway over one database: its pool and service, an FS
// artifact store (which a test can block), a stub clock (nil for a bundle
// on the database clock), and an httptest server with the gateway's handler.
type bundle struct {
	url    string
	pool   *pgxpool.Pool
	svc    *fencing.Service
	store  *testStore
	signer *grant.Signer
	m      *metrics.Metrics
	gw     *Gateway
	srv    *httptest.Server
	clock  *clock.Stub
	logs   *syncbuf.Buffer
}

// setup creates a database with a buyer, two paired devices and a revoked
// one, and a running gateway over it. cfg's zero fields take test values:
// the stub clock, a 30s lease, and no poll or sweep loop (tests that want
// them say so).
func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	url := pgprovider.MustDatabase(t, templateName, store.Migrate)
	fs, err := artifact.NewFS(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = fs.Close() })
	b := newBundle(t, url, &testStore{Store: fs}, cfg)
	ctx := context.Background()
	require.NoError(t, b.svc.CreateBuyer(ctx, buyerID, "buyer", 100000))
	require.NoError(t, b.svc.CreateDevice(ctx, device1, "mac1", services, 4, protocol.HashCommitToken(token1)))
	require.NoError(t, b.svc.CreateDevice(ctx, device2, "mac2", services, 1, protocol.HashCommitToken(token2)))
	require.NoError(t, b.svc.CreateDevice(ctx, revokedDev, "mac3", services, 1, protocol.HashCommitToken(tokenRevoked)))
	require.NoError(t, b.svc.RevokeDevice(ctx, revokedDev))
	return b
}

// peer starts a second gateway process on b's database and store: its own
// pool, service, listener and server.
func (b *bundle) peer(t *testing.T, cfg Config) *bundle {
	t.Helper()
	cfg.Clock = realClock
	if b.clock != nil {
		cfg.Clock = b.clock
	}
	return newBundle(t, b.url, b.store, cfg)
}

func newBundle(t *testing.T, url string, st *testStore, cfg Config) *bundle {
	t.Helper()
	ctx := context.Background()
	pool, err := store.OpenPool(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := &bundle{url: url, pool: pool, store: st, m: metrics.New()}
	t.Cleanup(func() { requireInvariants(t, pool) })
	switch c := cfg.Clock.(type) {
	case nil:
		b.clock = clock.NewStub(t0)
		cfg.Clock = b.clock
	case *clock.Stub:
		b.clock = c
	case clock.Real:
		cfg.Clock = nil
	}
	cfg.LeaseTTL = ttl
	if cfg.PollInterval == 0 {
		cfg.PollInterval = -1
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = -1
	}
	b.svc = fencing.NewService(pool, st, protocol.RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader},
		fencing.Config{LeaseTTL: ttl, FaultPoints: faultpoint.New()})
	b.signer, err = grant.NewSigner([]byte(strings.Repeat("k", grant.MinKeyBytes)), "http://artifacts.test")
	require.NoError(t, err)
	b.logs = &syncbuf.Buffer{}
	b.gw = New(b.svc, pool, b.signer, b.m, slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), b.logs), nil)), cfg)
	b.srv = httptest.NewServer(b.gw.Handler())
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- b.gw.Run(runCtx) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		require.NoError(t, b.gw.Shutdown(sctx))
		stop()
		require.NoError(t, <-ran)
		b.srv.Close()
	})
	select {
	case <-b.gw.Listening():
	case <-time.After(deviceclient.Timeout):
		t.Fatal("gateway never started listening")
	}
	return b
}

// realClock marks a bundle whose decisions use the database clock and
// whose timers are real.
var realClock clock.Clock = clock.Real{}

func requireInvariants(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	v, err := store.CheckInvariants(context.Background(), pool)
	require.NoError(t, err)
	require.Empty(t, v, "invariant violations")
}

// now is the instant the test acts at: the stub's, or zero (database clock).
func (b *bundle) now() time.Time {
	if b.clock == nil {
		return time.Time{}
	}
	return b.clock.Now()
}

func (b *bundle) wsURL() string { return deviceclient.WSURL(b.srv.URL, protocol.SessionPath) }

// dial opens a session for token and closes it when the test ends.
func (b *bundle) dial(t *testing.T, token string) *deviceclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deviceclient.Timeout)
	defer cancel()
	c, _, err := deviceclient.Dial(ctx, b.wsURL(), token)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// connect dials and says hello with the given slots.
func (b *bundle) connect(t *testing.T, token string, total, free int) *deviceclient.Client {
	t.Helper()
	c := b.dial(t, token)
	deviceclient.MustHello(t, c, services, total, free)
	return c
}

// createJob queues a job, which the service layer announces on JobsChannel;
// with notify=false the gateway ignores that announcement from then on, so
// only the polling fallback can find the job.
func (b *bundle) createJob(t *testing.T, notify bool) string {
	t.Helper()
	ctx := context.Background()
	if !notify {
		b.gw.ignoreJobs.Store(true)
	}
	r, err := b.svc.CreateJob(ctx, b.now(), protocol.CreateJobRequest{BuyerID: buyerID, Service: service,
		Params: map[string]string{"seed": "s1"}, Input: protocol.InputRef{Bytes: 123, SHA256: inputSHA},
		MaxAttempts: 3, AdmissionWindow: time.Hour})
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCreated, r.Code, r.Message)
	return r.JobID
}

// uploading reports the uploading phase of an offer and expects progress_ok.
func uploading(t *testing.T, c *deviceclient.Client, o *protocol.LeaseOffer) {
	t.Helper()
	deviceclient.MustSend(t, c, deviceclient.Progress(o, protocol.AttemptUploading))
	ok := deviceclient.Expect[protocol.ProgressOK](t, c)
	require.Equal(t, o.AttemptID, ok.AttemptID)
}

// putOutput writes a valid synthetic MP4 at the offer's output key, as the
// agent's upload would, and returns the matching commit output.
func (b *bundle) putOutput(t *testing.T, o *protocol.LeaseOffer) protocol.Output {
	t.Helper()
	data := mp4.Synthetic(mp4.SyntheticParams{Seed: o.AttemptID})
	obj, err := b.store.Put(context.Background(), o.Output.Key, bytes.NewReader(data))
	require.NoError(t, err)
	return protocol.Output{Key: o.Output.Key, Bytes: obj.Bytes, SHA256: obj.SHA256}
}

func (b *bundle) snapshot(t *testing.T) protocol.Snapshot {
	t.Helper()
	s, err := store.Snapshot(context.Background(), b.pool)
	require.NoError(t, err)
	return s
}

func (b *bundle) jobStatus(t *testing.T, jobID string) protocol.JobStatus {
	t.Helper()
	var st protocol.JobStatus
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT status FROM jobs WHERE id = $1`, jobID).Scan(&st))
	return st
}

// testStore is the artifact store with a switch that holds reads (and so
// verification) until the test lets them go.
type testStore struct {
	artifact.Store
	mu     sync.Mutex
	hold   chan struct{} // closed by the test to let held reads go
	opened chan struct{} // receives once per held read
}

// holdReads makes the next reads wait until the returned func is called.
func (s *testStore) holdReads() (opened <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold, s.opened = make(chan struct{}), make(chan struct{}, 16)
	hold := s.hold
	return s.opened, func() { close(hold) }
}

func (s *testStore) Open(ctx context.Context, key string) (artifact.Reader, artifact.Object, error) {
	s.mu.Lock()
	hold, opened := s.hold, s.opened
	s.mu.Unlock()
	if hold != nil {
		opened <- struct{}{}
		<-hold
	}
	return s.Store.Open(ctx, key)
}

// tick is how often Eventually re-checks a condition.
const tick = 5 * time.Millisecond

// sessionFree is the free-slot count of the device's session here (-1
// when it has none): what the offerer decides by.
func sessionFree(b *bundle, deviceID string) int {
	ss := b.gw.sessionsOf(deviceID)
	if len(ss) != 1 {
		return -1
	}
	ss[0].mu.Lock()
	defer ss[0].mu.Unlock()
	return ss[0].slotsFree
}

func requireLiveAttempts(t *testing.T, b *bundle, deviceID string, want int) {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sqlCountLive, deviceID).Scan(&n))
	require.Equal(t, want, n)
}

// metricValue reads a counter or gauge (client_golang's testutil would
// need a module this repository does not require).
func metricValue(m prometheus.Metric) float64 {
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		panic(err)
	}
	switch {
	case out.Counter != nil:
		return out.Counter.GetValue()
	case out.Gauge != nil:
		return out.Gauge.GetValue()
	}
	panic("metricValue: not a counter or gauge")
}

// requireUnchanged compares two snapshots except for the devices'
// last_seen_at, which a pong (to a ping fired when a test advances the stub
// clock) may move at any moment. That a refused frame heartbeats nothing is
// TestRejectedFramesDoNotHeartbeat's, with pings off.
func requireUnchanged(t *testing.T, before, after protocol.Snapshot) {
	t.Helper()
	strip := func(s protocol.Snapshot) protocol.Snapshot {
		s.Devices = append([]protocol.DeviceRow(nil), s.Devices...)
		for i := range s.Devices {
			s.Devices[i].LastSeenAt = time.Time{}
		}
		return s
	}
	require.Equal(t, strip(before), strip(after))
}
