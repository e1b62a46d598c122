package targets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// SyntheticOutput is the output every harness attempt uploads: a small valid
// MP4 derived from the attempt id, so verification really walks the file.
func SyntheticOutput(jobID, attemptID string) protocol.Output {
	data := syntheticBytes(attemptID)
	sum := sha256.Sum256(data)
	return protocol.Output{Key: protocol.OutputKey(jobID, attemptID), Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
}

func syntheticBytes(attemptID string) []byte {
	return mp4.Synthetic(mp4.SyntheticParams{Seed: attemptID, MdatBytes: 2048})
}

// lateBytes is what an upload event sends: a valid MP4, but not the
// attempt's honest output, so a late upload that was published shows in
// the stored-output check.
func lateBytes(attemptID string) []byte {
	return mp4.Synthetic(mp4.SyntheticParams{Seed: attemptID + "/late", MdatBytes: 1024})
}

// uploadReply maps an upload's outcome to the contract's reply.
func uploadReply(err error) (protocol.Reply, error) {
	var sealed *fencing.SealedError
	switch {
	case errors.As(err, &sealed):
		return protocol.Reply{Code: protocol.CodeOutputSealed}, nil
	case err != nil:
		return protocol.Reply{}, err
	}
	return protocol.Reply{Code: protocol.CodeUploadOK}, nil
}

// uploadHonest puts the attempt's honest output before a commit, as its
// agent does, through the same seal as any upload: a commit of an attempt
// whose output is already sealed leaves the sealed bytes alone.
func uploadHonest(ctx context.Context, svc *fencing.Service, c protocol.Commit) error {
	if !protocol.ValidID(c.JobID) || !protocol.ValidID(c.AttemptID) {
		return nil
	}
	_, err := svc.PutOutput(ctx, c.JobID, c.AttemptID, bytes.NewReader(syntheticBytes(c.AttemptID)))
	if _, err := uploadReply(err); err != nil {
		return fmt.Errorf("upload output: %w", err)
	}
	return nil
}

// checkAll is CheckInvariants over the rows plus CheckOutputs over the
// store, rendered as the runner wants them.
func checkAll(ctx context.Context, pool store.Querier, st artifact.Store) ([]string, error) {
	vs, err := store.CheckInvariants(ctx, pool)
	if err != nil {
		return nil, err
	}
	outs, err := store.CheckOutputs(ctx, pool, st)
	if err != nil {
		return nil, err
	}
	return renderViolations(append(vs, outs...)), nil
}

// auditAll is checkAll plus a projection (scope nil or Whole: the whole;
// else the rows scope selects), with rs the state store.Audit keeps between
// calls.
func auditAll(ctx context.Context, pool store.Querier, st artifact.Store, rs *store.Scope, scope *fuzz.RowScope) ([]string, protocol.Snapshot, bool, error) {
	rs.Whole, rs.ExpectWrites = true, false
	if scope != nil {
		rs.Jobs, rs.JournalFrom, rs.Whole, rs.ExpectWrites = scope.Jobs, scope.JournalFrom, scope.Whole, scope.Changed
	}
	vs, snap, unchanged, err := store.Audit(ctx, pool, st, rs)
	return renderViolations(vs), snap, unchanged, err
}

func renderViolations(vs []protocol.Violation) []string {
	if len(vs) == 0 {
		return nil
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("invariant %d: %s", v.Invariant, v.Message)
	}
	return out
}

// PostgresTarget runs operations through fencing.Service on a real database.
type PostgresTarget struct {
	svc   *fencing.Service
	pool  *pgxpool.Pool
	store artifact.Store
	// scope is what store.Audit keeps between calls.
	scope store.Scope
}

// PostgresWorkers owns one database and one artifact directory per campaign
// worker; each run empties its worker's tables and re-seeds the world, which
// is much cheaper than a database per run.
type PostgresWorkers struct {
	URLs    []string
	Variant fencing.Variant
	mu      sync.Mutex
	res     map[int]*pgResources
}

// pgResources are one worker's: its pool, artifact directory and emptier.
type pgResources struct {
	pool    *pgxpool.Pool
	dir     string
	emptier tableEmptier
}

// NewPostgresWorkers creates n databases with newDB (which returns the URL of
// a freshly migrated database).
func NewPostgresWorkers(ctx context.Context, n int, variant fencing.Variant, newDB func(ctx context.Context) (string, error)) (*PostgresWorkers, error) {
	w := &PostgresWorkers{Variant: variant, res: map[int]*pgResources{}}
	for i := 0; i < n; i++ {
		url, err := newDB(ctx)
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("database for worker %d: %w", i, err)
		}
		w.URLs = append(w.URLs, url)
	}
	return w, nil
}

// Close releases every pool and artifact directory.
func (w *PostgresWorkers) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.res {
		r.pool.Close()
		_ = os.RemoveAll(r.dir)
	}
}

// RoundTrips is the round trips the workers' pools have made so far (see
// roundTrips).
func (w *PostgresWorkers) RoundTrips() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var n int64
	for _, r := range w.res {
		n += roundTrips(r.pool)
	}
	return n
}

// roundTrips sums what the pools' counters (store.DBCounter) saw: one round
// trip per statement sent alone and one per pipelined batch, the harness's
// own statements (resets, seeding, audits) with the service's.
func roundTrips(pools ...*pgxpool.Pool) int64 {
	var n int64
	for _, p := range pools {
		if c := store.DBCounter(p); c != nil {
			for _, v := range c.Snapshot() {
				n += v.RoundTrips
			}
		}
	}
	return n
}

func (w *PostgresWorkers) resources(ctx context.Context, worker int) (*pgResources, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r, ok := w.res[worker]; ok {
		return r, nil
	}
	if worker >= len(w.URLs) {
		return nil, fmt.Errorf("no database for worker %d", worker)
	}
	p, err := openCampaignPool(ctx, w.URLs[worker])
	if err != nil {
		return nil, err
	}
	dir, err := artifactScratch("rendermac-artifacts-")
	if err != nil {
		p.Close()
		return nil, err
	}
	r := &pgResources{pool: p, dir: dir}
	w.res[worker] = r
	return r, nil
}

// Factory returns a fuzz.Factory whose targets are the model and Postgres.
func (w *PostgresWorkers) Factory(modelVariant string) fuzz.Factory {
	return func(ctx context.Context, worker int, seed uint64) ([]fuzz.Target, error) {
		pg, err := w.Target(ctx, worker, seed)
		if err != nil {
			return nil, err
		}
		return []fuzz.Target{fuzz.NewModelTarget(seed, simVariant(modelVariant)), pg}, nil
	}
}

// Target returns a Postgres target over worker's database, emptied and
// seeded with the world's cast, drawing ids from seed like the model does.
func (w *PostgresWorkers) Target(ctx context.Context, worker int, seed uint64) (*PostgresTarget, error) {
	r, err := w.resources(ctx, worker)
	if err != nil {
		return nil, err
	}
	pool := r.pool
	if err := r.emptier.emptyAll(ctx, pool); err != nil {
		return nil, err
	}
	st, err := artifact.NewFSUnsynced(r.dir)
	if err != nil {
		return nil, err
	}
	svc := fencing.NewService(pool, st, fuzz.IDSource(seed), fencing.Config{
		LeaseTTL: fuzz.WorldLeaseTTL, HeartbeatWindow: fuzz.WorldHeartbeatWindow, Variant: w.Variant})
	for _, b := range fuzz.WorldBuyers {
		if err := svc.CreateBuyer(ctx, b.ID, "buyer-"+b.ID[len(b.ID)-1:], b.BalanceCents); err != nil {
			return nil, fmt.Errorf("seed buyer: %w", err)
		}
	}
	for _, d := range fuzz.WorldDevices {
		tokenHash := protocol.HashCommitToken("device-token-" + d.ID)
		if err := svc.CreateDevice(ctx, d.ID, "mac-"+d.ID[len(d.ID)-1:], d.Services, d.SlotsTotal, tokenHash); err != nil {
			return nil, fmt.Errorf("seed device: %w", err)
		}
	}
	if err := seedOperator(ctx, pool); err != nil {
		return nil, err
	}
	return &PostgresTarget{svc: svc, pool: pool, store: st}, nil
}

// tableEmptier empties one worker's database before each run (emptyAll).
// It builds the statement from the catalogue on its first run and keeps
// it: the tables and sequences are the migrated schema's for the whole
// campaign (no target runs DDL), so every later build would give the same
// text, and it cost a catalogue query (2 ms) per target per run.
type tableEmptier struct {
	mu       sync.Mutex
	sql      string // the DELETEs
	truncate string // the TRUNCATE
	runs     int
}

// truncateEvery is how often (in runs) emptyAll truncates instead of
// deleting. Deleted rows stay in the tables and their indexes as dead
// tuples until a vacuum, and every later read scans past them: over 62 runs
// a worker (500 seeds on 8 workers) the invariant statement's mean grew
// from 0.38 to 0.48 ms. A truncate bounds that for less than a vacuum
// costs, but it is dear itself: 40 ms of Postgres time, and every cached
// plan over the tables is invalidated in every session of the worker's
// database, each planned again on its next call (the invariant statement
// alone takes 16-30 ms to plan). A three-way worker's database has a dozen
// sessions (the Postgres target's, the stack's pools and its listener), so
// at every 8 runs the truncates and the plans after them were a fifth of
// the three-way campaign's Postgres time (pg_stat_statements, 200 seeds x
// 60 steps on 8 workers: 23.4 s of execution and 6.1 s of planning, against
// 20.0 and 3.4 s with none). Every 32 runs, qualify's model-vs-Postgres
// workers (62 runs each) truncate once and its three-way workers (25) never.
const truncateEvery = 32

// emptyAll empties every table but goose's version table and restarts
// their sequences, as TRUNCATE ... RESTART IDENTITY would, in one statement.
//
// It deletes rather than truncates: a run leaves a few hundred rows, and
// TRUNCATE gives every table and index a new file and invalidates every
// session's cached plans, which cost 36-58 ms of Postgres time per run
// (25% of a model-vs-Postgres campaign's, 37% of a three-way one's, by
// pg_stat_statements) against 2-5 ms for the deletes. All the deletes are
// one statement's data-modifying CTEs, so the foreign keys (jobs and
// job_attempts reference each other) are checked once, after every table is
// empty. The dead rows left behind are invisible to every read; every
// truncateEvery-th run truncates instead, which drops them (a vacuum after
// every run cost more than the scans it saves). Nothing of a run outlives
// it that a comparison could see: rows are gone, sequences restart, and no
// campaign reads xmin across runs (store.Scope's mark starts afresh with
// each target).
func (e *tableEmptier) emptyAll(ctx context.Context, pool *pgxpool.Pool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sql == "" {
		if err := pool.QueryRow(ctx, sqlEmptyStatement).Scan(&e.sql, &e.truncate); err != nil {
			return fmt.Errorf("list tables: %w", err)
		}
	}
	e.runs++
	sql, args := e.sql, []any{1}
	if e.runs%truncateEvery == 0 {
		sql, args = e.truncate, nil
	}
	// The argument (setval's 1) makes pgx send the statement as a prepared
	// one, planned once per connection (and again after a truncate), where
	// with no argument it goes as a simple query, planned on every run:
	// 1.6 ms of planning beside 1.6 ms of execution.
	if _, err := pool.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("empty tables: %w", err)
	}
	return nil
}

// sqlEmptyStatement builds emptyAll's statement from the catalogue, so a new
// table or sequence is emptied without a change here: WITH d1 AS (DELETE
// FROM t1), ... SELECT setval(s, $1, false), ... ($1 = 1).
const sqlEmptyStatement = `SELECT 'WITH ' || (SELECT string_agg(format('d%s AS (DELETE FROM %I)', n, tablename), ', ')
        FROM (SELECT tablename, row_number() OVER (ORDER BY tablename) n FROM pg_tables
              WHERE schemaname = 'public' AND tablename <> 'goose_db_version') t)
    || ' SELECT ' || coalesce((SELECT string_agg(format('setval(%L, $1, false)', sequencename), ', ' ORDER BY sequencename)
        FROM pg_sequences WHERE schemaname = 'public' AND sequencename <> 'goose_db_version_id_seq'), '$1::bigint'),
    'TRUNCATE ' || (SELECT string_agg(format('%I', tablename), ', ' ORDER BY tablename) FROM pg_tables
        WHERE schemaname = 'public' AND tablename <> 'goose_db_version') || ' RESTART IDENTITY'`

// Name implements fuzz.Target.
func (t *PostgresTarget) Name() string { return "postgres" }

// CreateJob implements fuzz.Target.
func (t *PostgresTarget) CreateJob(ctx context.Context, now time.Time, req protocol.CreateJobRequest) (protocol.Reply, error) {
	return t.svc.CreateJob(ctx, now, req)
}

// Lease implements fuzz.Target.
func (t *PostgresTarget) Lease(ctx context.Context, now time.Time, dev string) (protocol.Reply, error) {
	return t.svc.Lease(ctx, now, dev)
}

// Progress implements fuzz.Target.
func (t *PostgresTarget) Progress(ctx context.Context, now time.Time, dev string, p protocol.Progress) (protocol.Reply, error) {
	return t.svc.Progress(ctx, now, dev, p)
}

// CommitBegin uploads the attempt's synthetic output (what a real agent
// would have done before committing), then runs transaction 1. outputOK is
// already reflected in the commit's claimed sha256.
func (t *PostgresTarget) CommitBegin(ctx context.Context, now time.Time, dev string, c protocol.Commit, _ bool) (protocol.Reply, error) {
	if err := uploadHonest(ctx, t.svc, c); err != nil {
		return protocol.Reply{}, err
	}
	return t.svc.CommitBegin(ctx, now, dev, c)
}

// Upload implements fuzz.Target through the service layer's seal.
func (t *PostgresTarget) Upload(ctx context.Context, _ time.Time, job, att string) (protocol.Reply, error) {
	_, err := t.svc.PutOutput(ctx, job, att, bytes.NewReader(lateBytes(att)))
	return uploadReply(err)
}

// CommitFinish implements fuzz.Target: verification, then transaction 2.
func (t *PostgresTarget) CommitFinish(ctx context.Context, now time.Time, job, att string) (protocol.Reply, error) {
	ok, err := t.svc.Verify(ctx, job, att)
	if err != nil {
		return protocol.Reply{}, err
	}
	return t.svc.CommitFinish(ctx, now, job, att, ok)
}

// Fail implements fuzz.Target.
func (t *PostgresTarget) Fail(ctx context.Context, now time.Time, dev string, f protocol.Fail) (protocol.Reply, error) {
	return t.svc.Fail(ctx, now, dev, f)
}

// Withdraw implements fuzz.Target.
func (t *PostgresTarget) Withdraw(ctx context.Context, now time.Time, dev string, w protocol.Withdrawal) (protocol.Reply, error) {
	return t.svc.Withdraw(ctx, now, dev, w)
}

// Cancel implements fuzz.Target.
func (t *PostgresTarget) Cancel(ctx context.Context, now time.Time, buyer, job string) (protocol.Reply, error) {
	return t.svc.Cancel(ctx, now, buyer, job)
}

// Sweep implements fuzz.Target.
func (t *PostgresTarget) Sweep(ctx context.Context, now time.Time) (protocol.SweepResult, error) {
	return t.svc.Sweep(ctx, now)
}

// Snapshot implements fuzz.Target.
func (t *PostgresTarget) Snapshot(ctx context.Context) (protocol.Snapshot, error) {
	return store.Snapshot(ctx, t.pool)
}

// CheckInvariants implements fuzz.Target with the SQL checks of store.
func (t *PostgresTarget) CheckInvariants(ctx context.Context) ([]string, error) {
	return checkAll(ctx, t.pool, t.store)
}

// Audit implements fuzz.Auditor: checkAll and a projection in one round
// trip.
func (t *PostgresTarget) Audit(ctx context.Context, scope *fuzz.RowScope) ([]string, protocol.Snapshot, bool, error) {
	return auditAll(ctx, t.pool, t.store, &t.scope, scope)
}

// Close implements fuzz.Target; the worker's pool outlives the run.
func (t *PostgresTarget) Close() error { return nil }

// Service is the service layer the target drives, for a caller that seeds
// more of the world (more devices, say) before a run; calls on it are
// calls on the target's database.
func (t *PostgresTarget) Service() *fencing.Service { return t.svc }

// SweepEffect renders one sweeper journal row as a sweep's effect, the form
// SweepEffects reports. The linearizability model renders its own sweeper
// rows with it too, so a target's effect and the model's are equal strings
// exactly when the rows agree.
func SweepEffect(kind, attemptID, from, to, code string) string {
	return fmt.Sprintf("%s %s %s>%s %s", kind, attemptID, from, to, code)
}

// SweepEffects implements linearize.Target: the service's sweep at now, then its
// sweeper journal rows at now by job (the caller runs one sweep per instant).
func (t *PostgresTarget) SweepEffects(ctx context.Context, now time.Time) (map[string][]string, error) {
	if _, err := t.svc.Sweep(ctx, now); err != nil {
		return nil, err
	}
	rows, err := t.pool.Query(ctx, `SELECT kind, job_id::text, coalesce(attempt_id::text, ''), coalesce(from_status, ''),
	        to_status, code
	    FROM job_events WHERE actor = 'sweeper' AND at = $1 ORDER BY id`, now)
	if err != nil {
		return nil, fmt.Errorf("sweep effects: %w", err)
	}
	defer rows.Close()
	eff := map[string][]string{}
	for rows.Next() {
		var kind, job, att, from, to, code string
		if err := rows.Scan(&kind, &job, &att, &from, &to, &code); err != nil {
			return nil, fmt.Errorf("sweep effects: %w", err)
		}
		eff[job] = append(eff[job], SweepEffect(kind, att, from, to, code))
	}
	return eff, rows.Err()
}

// seedOperator inserts the world's operator, who pauses and resumes
// services, with the hash of its credential (the stack's admin routes take
// the credential itself).
func seedOperator(ctx context.Context, pool *pgxpool.Pool) error {
	op := fuzz.WorldOperator
	if _, err := pool.Exec(ctx, `INSERT INTO operators (id, name, token_hash) VALUES ($1, $2, $3)`,
		op.ID, op.Name, api.HashSecret(op.Credential)); err != nil {
		return fmt.Errorf("seed operator: %w", err)
	}
	return nil
}

// PauseService implements fuzz.Target as the world's operator.
func (t *PostgresTarget) PauseService(ctx context.Context, now time.Time, service string) (protocol.Reply, error) {
	return t.svc.PauseService(ctx, now, fuzz.WorldOperator.ID, service)
}

// ResumeService implements fuzz.Target as the world's operator.
func (t *PostgresTarget) ResumeService(ctx context.Context, now time.Time, service string) (protocol.Reply, error) {
	return t.svc.ResumeService(ctx, now, fuzz.WorldOperator.ID, service)
}
