package targets

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/internal/s3provider"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// StackWorkers owns the full stack's per-worker resources: one database
// (emptied and re-seeded for every run, like PostgresWorkers), an
// artifact directory, and three pools on that database: the buyer API's
// and harness's, the frames gateway's and the lease gateway's. The two
// gateway pools carry a transaction tracer (txSignal). The frames
// gateway's listener LISTENs on a connection of the worker's, reset after
// every run (listenerConn). Gateways, sessions and clocks are built fresh
// for every run (StackTarget).
type StackWorkers struct {
	URLs []string
	// Variant breaks the stack's service layer (never the model's or the
	// Postgres target's), so a run shows the stack driver catching it.
	Variant fencing.Variant
	// Marks counts, over every run, the branches the stack driver exists
	// for, so that tests can assert they were reached.
	Marks StackMarks
	// S3, when set, puts every run's artifacts in a bucket of this real
	// S3 server (a bucket per worker, a fresh prefix per run) instead of a
	// directory: verification seals, CheckOutputs reads the sealed copies.
	S3 *s3provider.Server

	mu  sync.Mutex
	res map[int]*stackResources
}

// StackMarks are counters of what the stack driver did.
type StackMarks struct {
	// WireOffers counts lease_offer frames received; NoOffers the Lease
	// steps the gateway answered with no offer.
	WireOffers, NoOffers atomic.Int64
	// WireCommits counts whole commits sent as commit frames;
	// SplitCommits the transaction-1-only commits run on the service layer.
	WireCommits, SplitCommits atomic.Int64
	// Progress and Fails count frames sent.
	Progress, Fails atomic.Int64
	// Withdrawals counts Withdraw steps run on the service layer.
	Withdrawals atomic.Int64
	// BadEpochFrames counts frames the decoder refused for lease_epoch < 1
	// (normalization 1 of StackTarget).
	BadEpochFrames atomic.Int64
	// CancelNotices counts cancel frames the gateway pushed to a device.
	CancelNotices atomic.Int64
	// LostNotices counts lease_conflict attempt_lost frames the gateway
	// pushed after a sweep lost an attempt.
	LostNotices atomic.Int64
	// HeartbeatsUndone counts device rows put back after a frame's
	// heartbeat (normalization 3).
	HeartbeatsUndone atomic.Int64
}

type stackResources struct {
	pool         *pgxpool.Pool // API, sweep, split commits, snapshots, harness SQL
	poolF, poolL *pgxpool.Pool // frames gateway, lease gateway
	txF, txL     *txSignal
	listen       *listenerConn // the frames gateway's listener's
	emptier      tableEmptier
	dir          string
	bucket       string       // with StackWorkers.S3
	s3http       *http.Client // the S3 stores' client, closed with the worker
}

// NewStackWorkers creates n databases with newDB (which returns the URL of
// a freshly migrated database).
func NewStackWorkers(ctx context.Context, n int, variant fencing.Variant, newDB func(ctx context.Context) (string, error)) (*StackWorkers, error) {
	w := &StackWorkers{Variant: variant, res: map[int]*stackResources{}}
	for i := 0; i < n; i++ {
		url, err := newDB(ctx)
		if err != nil {
			return nil, fmt.Errorf("stack database for worker %d: %w", i, err)
		}
		w.URLs = append(w.URLs, url)
	}
	return w, nil
}

// Close releases every pool and artifact directory.
func (w *StackWorkers) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.res {
		r.close()
	}
	w.res = map[int]*stackResources{}
}

func (r *stackResources) close() {
	r.listen.close()
	for _, p := range []*pgxpool.Pool{r.pool, r.poolF, r.poolL} {
		if p != nil {
			p.Close()
		}
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
	if r.s3http != nil {
		r.s3http.CloseIdleConnections()
	}
}

func (w *StackWorkers) resources(ctx context.Context, worker int) (*stackResources, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r, ok := w.res[worker]; ok {
		return r, nil
	}
	if worker >= len(w.URLs) {
		return nil, fmt.Errorf("no stack database for worker %d", worker)
	}
	url := w.URLs[worker]
	r := &stackResources{txF: &txSignal{}, txL: &txSignal{}, listen: &listenerConn{url: url}}
	var err error
	if r.pool, err = openCampaignPool(ctx, url); err == nil {
		if r.poolF, err = tracedPool(ctx, url, r.txF); err == nil {
			if r.poolL, err = tracedPool(ctx, url, r.txL); err == nil {
				r.dir, err = artifactScratch("rendermac-stack-artifacts-")
			}
		}
	}
	if err == nil && w.S3 != nil {
		if r.bucket, err = w.S3.NewBucket(ctx); err == nil {
			r.s3http = &http.Client{Transport: &http.Transport{}}
		}
	}
	if err != nil {
		r.close()
		return nil, fmt.Errorf("stack resources for worker %d: %w", worker, err)
	}
	w.res[worker] = r
	return r, nil
}

// tracedPool is a small pool whose connections report transaction ends to
// sig, after the pool's own counter (store.DBCounter) has counted them.
func tracedPool(ctx context.Context, url string, sig *txSignal) (*pgxpool.Pool, error) {
	cfg, err := store.PoolConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 4
	store.AlsoTrace(cfg, sig)
	return store.OpenPoolConfig(ctx, campaignSessions(cfg))
}

// RoundTrips is the round trips the workers' pools have made so far (see
// roundTrips); the listeners' connections, which only LISTEN, are aside.
func (w *StackWorkers) RoundTrips() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var n int64
	for _, r := range w.res {
		n += roundTrips(r.pool, r.poolF, r.poolL)
	}
	return n
}

// ThreeWayFactory returns a fuzz.Factory whose targets are the model
// (behind a CommitProbe), the Postgres service layer and the full stack,
// each over its own storage, compared step by step.
func ThreeWayFactory(pg *PostgresWorkers, st *StackWorkers) fuzz.Factory {
	return func(ctx context.Context, worker int, seed uint64) ([]fuzz.Target, error) {
		probe := NewCommitProbe(fuzz.NewModelTarget(seed, ""))
		p, err := pg.Target(ctx, worker, seed)
		if err != nil {
			return nil, err
		}
		s, err := st.Target(ctx, worker, seed, probe)
		if err != nil {
			return nil, fmt.Errorf("full stack for seed %d: %w", seed, err)
		}
		return []fuzz.Target{probe, p, s}, nil
	}
}
