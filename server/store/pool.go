package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/internal/dbstat"
)

// DefaultPoolMaxConns is the pool size when the URL does not set pool_max_conns.
const DefaultPoolMaxConns = 20

// idlePing is how long a connection may sit idle before it is pinged on
// acquire whatever else happened (pgxpool's own default).
const idlePing = time.Second

// OpenPool connects to url and checks the connection with a ping, so that a
// bad URL fails here rather than at the first operation.
func OpenPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := PoolConfig(url)
	if err != nil {
		return nil, err
	}
	return OpenPoolConfig(ctx, cfg)
}

// PoolConfig parses url into the pool configuration OpenPool uses: the
// default size and the health check after connection errors (see
// poolHealth).
func PoolConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	// pgxpool's default, max(4, CPUs), would throttle a gateway serving
	// many sessions; a pool_max_conns in the URL still wins.
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultPoolMaxConns
	}
	h := &poolHealth{}
	cfg.ShouldPing = h.shouldPing
	cfg.AfterRelease = keepConn
	cfg.ConnConfig.Tracer = h
	return cfg, nil
}

// OpenPoolConfig opens a pool from cfg and pings it.
func OpenPoolConfig(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open pool: ping: %w", err)
	}
	return pool, nil
}

// poolHealth makes the pool ping, before handing it out, every idle
// connection that went idle before the last connection the pool saw die.
// A network cut or a Postgres restart kills all idle connections at once,
// but pgx only learns it by using each one; without this a commit's few
// retries (gateway finalRetries) would each draw a dead connection that
// idled less than pgxpool's one second and fail, although a fresh
// connection would have worked. A connection used since the failure has
// proved itself and is not pinged. The times are real (monotonic) time:
// they measure infrastructure, not decisions.
type poolHealth struct {
	// counter tallies the pool's database work by operation (dbstat).
	counter dbstat.Counter
	// next, when set (AlsoTrace), sees every statement and batch after
	// the counter: the two tracers composed.
	next QueryBatchTracer
	// lastDeath is when a released connection was last found closed, in
	// nanoseconds since start (0: never).
	lastDeath atomic.Int64
}

var poolEpoch = time.Now()

func (h *poolHealth) shouldPing(_ context.Context, p pgxpool.ShouldPingParams) bool {
	if p.IdleDuration > idlePing {
		return true
	}
	d := h.lastDeath.Load()
	if d == 0 {
		return false
	}
	// Idle since before the death: it may have died with it.
	return p.IdleDuration >= time.Since(poolEpoch)-time.Duration(d)
}

// TraceRelease implements pgxpool.ReleaseTracer: a connection released
// closed died of an error (pgx closes a connection on network and protocol
// errors), and every connection idle since may be dead too.
func (h *poolHealth) TraceRelease(_ *pgxpool.Pool, data pgxpool.TraceReleaseData) {
	if data.Conn.IsClosed() {
		h.lastDeath.Store(int64(time.Since(poolEpoch)))
	}
}

// readOnlyMark is the key, in a connection's pgconn.CustomData, of the
// mark that the server on its other end refused a write as read-only.
const readOnlyMark = "rendermac.read_only"

// markReadOnly marks conn when err says its server is read-only
// (SQLSTATE 25006: a standby, or a primary being demoted, or one an
// operator made read-only): keepConn then drops it on release.
func markReadOnly(conn *pgx.Conn, err error) {
	if conn != nil && ReadOnly(err) {
		conn.PgConn().CustomData()[readOnlyMark] = true
	}
}

// keepConn is the pool's AfterRelease: a connection whose server refused
// a write as read-only is closed, not returned to the pool. Behind a
// multi-host URL or a proxy, a connection opened to the primary can find
// itself on a standby after a failover; reused, it would refuse every
// write it carries, so the retry that follows must get a fresh one, which
// pgx opens to whichever host takes writes now (docs/SPEC.md,
// "Replicated Postgres").
func keepConn(conn *pgx.Conn) bool {
	return conn.PgConn().CustomData()[readOnlyMark] == nil
}

// sqlstateReadOnly is read_only_sql_transaction.
const sqlstateReadOnly = "25006"

// ReadOnly reports whether err is Postgres refusing a write because the
// server is read-only (SQLSTATE 25006, read_only_sql_transaction).
func ReadOnly(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == sqlstateReadOnly
}

// TraceQueryStart implements pgx.QueryTracer, which the pool requires of a
// release tracer: each statement is counted (DBCounter).
func (h *poolHealth) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	ctx = h.counter.TraceQueryStart(ctx, conn, data)
	if h.next != nil {
		ctx = h.next.TraceQueryStart(ctx, conn, data)
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer: a read-only refusal marks
// the connection (markReadOnly).
func (h *poolHealth) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	markReadOnly(conn, data.Err)
	if h.next != nil {
		h.next.TraceQueryEnd(ctx, conn, data)
	}
}

// TraceBatchStart implements pgx.BatchTracer: each batch is counted.
func (h *poolHealth) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	ctx = h.counter.TraceBatchStart(ctx, conn, data)
	if h.next != nil {
		ctx = h.next.TraceBatchStart(ctx, conn, data)
	}
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer: a read-only refusal marks
// the connection (markReadOnly).
func (h *poolHealth) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	markReadOnly(conn, data.Err)
	if h.next != nil {
		h.next.TraceBatchQuery(ctx, conn, data)
	}
}

// TraceBatchEnd implements pgx.BatchTracer: a read-only refusal marks
// the connection (markReadOnly).
func (h *poolHealth) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	markReadOnly(conn, data.Err)
	if h.next != nil {
		h.next.TraceBatchEnd(ctx, conn, data)
	}
}

// QueryBatchTracer traces statements and batches (a pgx tracer).
type QueryBatchTracer interface {
	pgx.QueryTracer
	pgx.BatchTracer
}

// AlsoTrace makes a pool opened from cfg (made by PoolConfig) hand every
// statement and batch to t as well, after counting it (an OpenTelemetry
// tracer beside the counter). It panics on a cfg PoolConfig did not make:
// a wiring bug.
func AlsoTrace(cfg *pgxpool.Config, t QueryBatchTracer) {
	h, ok := cfg.ConnConfig.Tracer.(*poolHealth)
	if !ok {
		panic("store.AlsoTrace: the pool config was not made by PoolConfig")
	}
	h.next = t
}

// DBCounter is the tally of the database work of a pool opened from
// PoolConfig (transactions, statements, round trips by dbstat operation),
// or nil for any other pool.
func DBCounter(pool *pgxpool.Pool) *dbstat.Counter {
	if h, ok := pool.Config().ConnConfig.Tracer.(*poolHealth); ok {
		return &h.counter
	}
	return nil
}

// QueueCommit queues COMMIT as the last statement of b, a batch that
// began its own transaction, so the writes and their COMMIT go in one
// round trip. A statement that fails before it makes Postgres skip the
// COMMIT (the transaction is left failed, for the caller to roll back or
// the pool to discard); a COMMIT of a failed transaction answers ROLLBACK,
// which is pgx.ErrTxCommitRollback here.
func QueueCommit(b *pgx.Batch) {
	b.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	})
}
