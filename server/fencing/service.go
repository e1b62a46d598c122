package fencing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/internal/variantset"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/faultpoint"
	"github.com/rendermac/rendermac/server/probe"
	"github.com/rendermac/rendermac/server/store"
)

// Configuration defaults (docs/semantics.md, common rules).
const (
	DefaultLeaseTTL        = 30 * time.Second
	DefaultHeartbeatWindow = 90 * time.Second
	DefaultMaxTxRetries    = 8
)

// Variant names a deliberately broken variant of the service (harness
// only). The variants exist only in a build with -tags mutations
// (variant_on.go); the default build knows none of them, and its fence
// code has no branch that a Variant could take. VariantNone is the
// correct service.
type Variant string

// VariantNone is the correct service, the only one a default build has.
const VariantNone Variant = ""

// ErrNoVariants is returned by CheckVariant in a build without
// -tags mutations for any name but VariantNone.
var ErrNoVariants = variantset.ErrNone

// Variants lists the broken variants this build has (none without
// -tags mutations: variant_on.go, variant_off.go).
func Variants() []Variant { return variants.All() }

// CheckVariant reports whether m is VariantNone or one of Variants.
func CheckVariant(m Variant) error { return variants.Check(m) }

// Config tunes a Service. Zero fields take the defaults above; a nil
// Services takes protocol.Services.
type Config struct {
	LeaseTTL        time.Duration
	HeartbeatWindow time.Duration
	Services        []protocol.Service
	// MaxTxRetries bounds how often one operation's transaction is re-run
	// after a serialization failure (40001) or a deadlock (40P01).
	MaxTxRetries int
	// Variant selects a broken variant; see Variant and CheckVariant.
	Variant Variant
	// Prober, when set, runs ffprobe on every output whose service has a
	// verification profile, after the structural walk (nil: the walk
	// alone, as the harness runs it).
	Prober *probe.Prober
	// FaultPoints is the registry this service's fault points hit (a
	// -tags faultpoints build only): nil is the process's, which `rendermac
	// server` arms from the environment; a harness sharing its process
	// with other services passes its own (faultpoint.New).
	FaultPoints *faultpoint.Points
}

// ErrInternal marks a state the service's own locks and checks should have
// made impossible (a fence that matched no row, an illegal transition). It
// is returned, never papered over, so the harness sees it as a failure.
var ErrInternal = errors.New("server: internal invariant broken")

// ErrNotFound is returned by the administrative operations for an unknown id.
var ErrNotFound = errors.New("server: not found")

// Service is the fenced control plane on Postgres: every operation of SPEC
// section 3 as one or two short transactions (Progress: one statement), with
// the order of checks and effects of docs/semantics.md. It is safe for concurrent use; several
// Services (gateway processes) may share one database.
type Service struct {
	pool  *pgxpool.Pool
	store artifact.Store
	ids   protocol.IDSource
	cfg   Config

	// v holds the broken variant's hooks: in the default build an empty
	// struct whose hooks are constant false, so the fences compile to the
	// contract alone.
	v variant

	mu      sync.Mutex
	retries map[string]int64
}

// Stats counts what the service retried.
type Stats struct {
	// Retries counts transaction re-runs after 40001 or 40P01, by operation
	// (the Op* names).
	Retries map[string]int64
}

// Operation names used in Stats and in error messages.
const (
	OpCreateJob    = "create_job"
	OpLease        = "lease"
	OpProgress     = "progress"
	OpCommitBegin  = "commit_begin"
	OpCommitFinish = "commit_finish"
	OpFail         = "fail"
	OpWithdraw     = "withdraw"
	OpCancel       = "cancel"
	OpSweep        = "sweep"
	// OpVerifyRead is the read of a committing attempt's claim that
	// Verify makes outside any transaction.
	OpVerifyRead = "verify_read"
	// OpUpload is an output upload's check of its attempt (PutOutput).
	OpUpload = "upload"
)

// NewService returns a Service over pool (the contract's schema, see
// store.Migrate), verifying outputs in store and drawing ids and tokens from ids.
func NewService(pool *pgxpool.Pool, store artifact.Store, ids protocol.IDSource, cfg Config) *Service {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.HeartbeatWindow <= 0 {
		cfg.HeartbeatWindow = DefaultHeartbeatWindow
	}
	if len(cfg.Services) == 0 {
		cfg.Services = protocol.Services
	}
	if cfg.MaxTxRetries <= 0 {
		cfg.MaxTxRetries = DefaultMaxTxRetries
	}
	return &Service{pool: pool, store: store, ids: &syncIDs{ids: ids}, cfg: cfg, v: newVariant(cfg.Variant), retries: map[string]int64{}}
}

// syncIDs serialises draws, so that a seeded IDSource (which is not safe
// for concurrent use) can back a Service that is.
type syncIDs struct {
	mu  sync.Mutex
	ids protocol.IDSource
}

func (s *syncIDs) NewJobID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids.NewJobID()
}

func (s *syncIDs) NewAttemptID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids.NewAttemptID()
}

func (s *syncIDs) NewCommitToken() (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids.NewCommitToken()
}

// Stats returns a copy of the retry counters.
func (s *Service) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{Retries: make(map[string]int64, len(s.retries))}
	for k, v := range s.retries {
		out.Retries[k] = v
	}
	return out
}

// FaultPoints is the registry the service's fault points hit (nil: the
// process's), for the gateway's own point.
func (s *Service) FaultPoints() *faultpoint.Points { return s.cfg.FaultPoints }

// service looks name up in the configured catalogue.
func (s *Service) service(name string) (protocol.Service, bool) {
	for _, sv := range s.cfg.Services {
		if sv.Name == name {
			return sv, true
		}
	}
	return protocol.Service{}, false
}

// retrying runs once, and again after a serialization failure or deadlock,
// up to MaxTxRetries re-runs, each counted under op. A write refused as
// read-only is re-run once, on the fresh connection the pool then hands
// out (the stale connection of a failover); refused again, the database
// as a whole is not taking writes, which is the caller's to wait out
// (Unavailable).
func (s *Service) retrying(ctx context.Context, op string, once func() error) error {
	readOnly := 0
	for try := 0; ; try++ {
		err := once()
		if err == nil {
			return nil
		}
		if store.ReadOnly(err) {
			readOnly++
		}
		if !retryable(err) || readOnly > 1 || try >= s.cfg.MaxTxRetries || ctx.Err() != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		s.mu.Lock()
		s.retries[op]++
		s.mu.Unlock()
	}
}

// pipelined runs one operation's READ COMMITTED transaction in as few
// round trips as its decisions allow: BEGIN, the database clock (when now
// is zero, see store.ResolveNow) and the first reads, which open queues, go
// out in one batch; the writes body makes are queued on its step and go
// out together when body flushes to read again; when body returns, the
// rest go out with COMMIT behind them. Row locks (FOR UPDATE, in the order
// of doc.go) give each operation the serial view it needs, so READ
// COMMITTED suffices. A serialization failure or deadlock re-runs all of
// it, up to MaxTxRetries times, each re-run counted, so open's callbacks
// and body must set (not add to) what they fill.
func (s *Service) pipelined(ctx context.Context, op string, now time.Time, actor protocol.Actor,
	open func(*pgx.Batch), body func(context.Context, *step) error) error {
	ctx = dbstat.WithOp(ctx, op)
	return s.retrying(ctx, op, func() error { return s.pipelineOnce(ctx, now, actor, open, body) })
}

func (s *Service) pipelineOnce(ctx context.Context, now time.Time, actor protocol.Actor, open func(*pgx.Batch),
	body func(context.Context, *step) error) (err error) {
	st := &step{now: clock.Stored(now), actor: actor, pipe: &pgx.Batch{}}
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if now.IsZero() {
		b.Queue(store.SQLNow, nil).QueryRow(func(r pgx.Row) error {
			var db time.Time
			if err := r.Scan(&db); err != nil {
				return fmt.Errorf("read database clock: %w", err)
			}
			st.now = db.UTC()
			return nil
		})
	}
	open(b)
	// The connection is held here, not by a pgx.Tx: the step's last
	// round trip commits (step.commit), and a pool's Tx would send COMMIT
	// again, in a round trip of its own, before giving its connection back.
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release() // after the rollback below
	tx, err := sendBegun(ctx, conn, b)
	if err != nil {
		return err
	}
	st.tx = tx
	defer func() {
		if err != nil && conn.Conn().PgConn().TxStatus() != 'I' {
			_ = tx.Rollback(ctx)
		}
	}()
	if err = body(ctx, st); err != nil {
		return err
	}
	return st.commit(ctx)
}

// sendBegun sends b, which starts with b.BeginTx, on conn in one round trip
// and returns its open transaction. When any of b's statements (or a
// QueryRow callback) fails, the transaction is rolled back and the first
// error returned, so the caller has nothing to close.
func sendBegun(ctx context.Context, conn interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}, b *pgx.Batch) (pgx.Tx, error) {
	br := conn.SendBatch(ctx, b)
	tx := br.Tx()
	if err := br.Close(); err != nil {
		if tx != nil {
			_ = tx.Rollback(ctx) // closed already when BEGIN itself failed
		}
		return nil, err
	}
	return tx, nil
}

// retryable: a serialization failure or deadlock, or a write refused as
// read-only (the pool has dropped that connection, see store.PoolConfig,
// so the re-run gets a fresh one, on whichever host takes writes now).
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") || store.ReadOnly(err)
}

// at is t + d in the stored form.
func at(t time.Time, d time.Duration) time.Time { return clock.Stored(t.Add(d)) }

func internalf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInternal}, args...)...)
}

// draws caches the ids and token one operation draws, so that a transaction
// re-run after 40001/40P01 inserts the same ids again: an operation consumes
// exactly the draws the model's does, which the harness relies on.
type draws struct {
	ids                       protocol.IDSource
	job, attempt, token, hash string
}

func (d *draws) jobID() string {
	if d.job == "" {
		d.job = d.ids.NewJobID()
	}
	return d.job
}

func (d *draws) attemptID() string {
	if d.attempt == "" {
		d.attempt = d.ids.NewAttemptID()
	}
	return d.attempt
}

func (d *draws) commitToken() (plaintext, hash string, err error) {
	if d.token == "" {
		if d.token, d.hash, err = d.ids.NewCommitToken(); err != nil {
			d.token, d.hash = "", ""
			return "", "", fmt.Errorf("draw commit token: %w", err)
		}
	}
	return d.token, d.hash, nil
}
