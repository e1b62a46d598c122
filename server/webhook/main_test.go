package webhook_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/internal/pgtest"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/metrics"
	"github.com/rendermac/rendermac/server/store"
	"github.com/rendermac/rendermac/server/webhook"
)

// TestMain stops the shared Postgres cluster, then checks for leaked
// goroutines.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, nil)) }

const (
	templateName = "rendermac_webhook"
	buyerID      = "00000000-0000-4000-8000-0000000000b1"
	quietBuyerID = "00000000-0000-4000-8000-0000000000b2"
	base         = 10 * time.Second
)

var (
	t0         = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	signingKey = bytes.Repeat([]byte{9}, 32)
)

// delivery is one POST the receiver saw.
type delivery struct {
	Header http.Header
	Body   []byte
}

// receiver is a buyer's webhook endpoint that answers with the statuses
// it is given, in turn (200 once they run out), and records every POST.
type receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	statuses []int
	got      []delivery
	// hold, when set, delays the reply to the first POST until it closes.
	hold chan struct{}
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	return startReceiver(t, &receiver{statuses: statuses})
}

// newHoldingReceiver records the first POST but holds its reply until the
// test ends, so the deliverer's timeout fires after the receiver got it.
func newHoldingReceiver(t *testing.T) *receiver {
	rc := startReceiver(t, &receiver{hold: make(chan struct{})})
	t.Cleanup(func() { close(rc.hold) }) // runs before srv.Close, which waits for handlers
	return rc
}

func startReceiver(t *testing.T, rc *receiver) *receiver {
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, delivery{Header: r.Header.Clone(), Body: body})
		status := http.StatusOK
		if len(rc.statuses) > 0 {
			status, rc.statuses = rc.statuses[0], rc.statuses[1:]
		}
		first := len(rc.got) == 1
		rc.mu.Unlock()
		if first && rc.hold != nil {
			<-rc.hold
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

type bundle struct {
	pool *pgxpool.Pool
	svc  *fencing.Service
	m    *metrics.Metrics
}

// setup gives a fresh database with two buyers: one whose webhook_url is
// rc's (when rc is non-nil) and one without a URL.
func setup(t *testing.T, rc *receiver) *bundle {
	t.Helper()
	ctx := context.Background()
	url := pgprovider.MustDatabase(t, templateName, store.Migrate)
	pool, err := store.OpenPool(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	fs, err := artifact.NewFS(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = fs.Close() })
	b := &bundle{pool: pool, m: metrics.New(),
		svc: fencing.NewService(pool, fs, protocol.RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader}, fencing.Config{})}
	require.NoError(t, b.svc.CreateBuyer(ctx, buyerID, "loud", 1000))
	require.NoError(t, b.svc.CreateBuyer(ctx, quietBuyerID, "quiet", 1000))
	if rc != nil {
		_, err := pool.Exec(ctx, `UPDATE buyers SET webhook_url = $2 WHERE id = $1`, buyerID, rc.srv.URL+"/hook")
		require.NoError(t, err)
	}
	return b
}

// deliverer returns a Deliverer posting with rc's client (closed with rc).
func (b *bundle) deliverer(t *testing.T, rc *receiver, cfg webhook.Config) *webhook.Deliverer {
	t.Helper()
	if rc != nil {
		cfg.Client = rc.srv.Client()
	}
	cfg.BackoffBase = base
	d, err := webhook.New(b.pool, signingKey, b.m, slog.New(slog.NewTextHandler(io.Discard, nil)), cfg)
	require.NoError(t, err)
	return d
}

// cancelledJob creates a queued job for buyer at now and cancels it, which
// enqueues its terminal webhook; it returns the job id.
func (b *bundle) cancelledJob(t *testing.T, buyer string, now time.Time) string {
	t.Helper()
	ctx := context.Background()
	r, err := b.svc.CreateJob(ctx, now, protocol.CreateJobRequest{BuyerID: buyer, Service: "synthetic.mp4",
		Input: protocol.InputRef{SHA256: protocol.HashCommitToken("")}, MaxAttempts: 3, AdmissionWindow: time.Hour})
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCreated, r.Code, "%+v", r)
	c, err := b.svc.Cancel(ctx, now, buyer, r.JobID)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCancelled, c.Code)
	return r.JobID
}

// outbox is a row of webhook_outbox as the tests inspect it.
type outbox struct {
	Attempts    int
	NextAttempt time.Time
	Delivered   *time.Time
	LastError   *string
}

func (b *bundle) outbox(t *testing.T, jobID string) outbox {
	t.Helper()
	var o outbox
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT attempts, next_attempt_at, delivered_at, last_error FROM webhook_outbox WHERE job_id = $1`, jobID).
		Scan(&o.Attempts, &o.NextAttempt, &o.Delivered, &o.LastError))
	o.NextAttempt = o.NextAttempt.UTC()
	return o
}
