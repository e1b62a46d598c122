package benchrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rendermac/rendermac/faults/targets"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/server/store"
)

// The pgbench comparison runs server/testdata/lease.pgbench on a database
// seeded in bulk. The seeding SQL and the pgbench run below are the one
// copy, shared with server/bench_test.go (BenchmarkLease, BenchmarkCommit).

const (
	// Slots is every bench device's slot count, the script's -D slots:
	// client w's k-th lease uses device BenchDevice(w, k/Slots), so no
	// device is ever full.
	Slots = 8
	// PgbenchJobs is how many queued jobs a pgbench database starts with:
	// it must not run dry within the run (a client that finds no job
	// aborts). When it does, callers repeat with four times as many.
	PgbenchJobs = 20000
	// SeedBuyers spread the seeded jobs, so that hold settlement (which
	// updates the buyer row) does not serialise every commit on one row.
	SeedBuyers = 32
)

// SeedCreated and SeedDeadline are the default creation instant and
// admission deadline of seeded jobs: before and after every instant a
// benchmark (or the real clock, which the pgbench script uses) passes.
var (
	SeedCreated  = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	SeedDeadline = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	pgbenchTPS   = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)
	pgbenchTx    = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
)

// BenchID is the uuid the seeding SQL gives bench devices and buyers:
// 00000000-0000-4000-8000-<x as 12 hex digits>.
func BenchID(x int64) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", x) }

// BenchDevice is worker (pgbench client) w's i-th seeded device; the SQL
// and the pgbench script compute the same id.
func BenchDevice(w, i int) string { return BenchID(int64(w)<<24 + int64(i)) }

const seedBuyerBase = 0xb00000000

// BenchBuyer is the k-th seeded buyer (0 <= k < Queued.Buyers).
func BenchBuyer(k int) string { return BenchID(seedBuyerBase + int64(k)) }

// sqlBenchID is BenchID in SQL.
const sqlBenchID = `('00000000-0000-4000-8000-' || lpad(to_hex(%s), 12, '0'))::uuid`

// sqlSeedQueued fills a migrated database the way CreateJob would have:
// @jobs queued jobs of @service (created @created + i µs, deadline
// @deadline) over @buyers buyers, each with a held hold of @price cents and
// its journal row, the buyers' balances and initial amounts conserving the
// holds.
var sqlSeedQueued = []string{
	`INSERT INTO buyers (id, name, balance_cents, captured_cents, initial_cents)
	 SELECT ` + fmt.Sprintf(sqlBenchID, fmt.Sprint(seedBuyerBase)+` + k`) + `, 'bench', 1000, 0, 1000
	 FROM generate_series(0, @buyers::int - 1) k`,
	`INSERT INTO jobs (id, buyer_id, service, params, input_bytes, input_sha256, max_attempts, attempt_count,
	                   status, request_fingerprint, created_at, admission_deadline, updated_at)
	 SELECT gen_random_uuid(), ` + fmt.Sprintf(sqlBenchID, fmt.Sprint(seedBuyerBase)+` + i % @buyers::int`) + `, @service, '{}', 10,
	        repeat('a1', 32), 3, 0, 'queued', md5(i::text) || md5(i::text),
	        @created::timestamptz + i * interval '1 microsecond', @deadline, @created::timestamptz + i * interval '1 microsecond'
	 FROM generate_series(1, @jobs::int) i`,
	`INSERT INTO holds (job_id, buyer_id, amount_cents, status, created_at)
	 SELECT id, buyer_id, @price, 'held', created_at FROM jobs`,
	`UPDATE buyers b SET initial_cents = b.initial_cents + h.sum
	 FROM (SELECT buyer_id, sum(amount_cents) AS sum FROM holds GROUP BY buyer_id) h WHERE b.id = h.buyer_id`,
	`INSERT INTO job_events (kind, job_id, attempt_id, from_status, to_status, code, actor, at)
	 SELECT 'job', id, NULL, NULL, 'queued', '', 'buyer', created_at FROM jobs ORDER BY created_at, id`,
}

// sqlSeedDevices adds $1 workers x $2 devices (BenchDevice(w, i)) offering
// $3 with $4 slots: the ids lease.pgbench computes.
const sqlSeedDevices = `
INSERT INTO devices (id, name, services, slots_total, status)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(w * 16777216 + i), 12, '0'))::uuid, 'bench', ARRAY[$3::text], $4, 'offline'
FROM generate_series(0, $1::int - 1) w, generate_series(0, $2::int - 1) i`

// DB is what seeding and RunPgbench need of a database: a *pgxpool.Pool,
// a *pgx.Conn or a pgx.Tx.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// SeedError is a failed seeding statement. Its message is the database's
// error alone; SQL is the statement.
type SeedError struct {
	SQL string
	Err error
}

func (e *SeedError) Error() string { return e.Err.Error() }
func (e *SeedError) Unwrap() error { return e.Err }

// Queued is what SeedQueued seeds.
type Queued struct {
	Jobs       int    // queued jobs
	Buyers     int    // buyers they are spread over
	Service    string // their service
	PriceCents int64  // each job's held hold
	Created    time.Time
	Deadline   time.Time // admission deadline
}

// SeedQueued fills a migrated database with q.Jobs queued jobs, their
// buyers, held holds and journal rows. A failing statement is a *SeedError.
func SeedQueued(ctx context.Context, db DB, q Queued) error {
	args := pgx.NamedArgs{"jobs": q.Jobs, "service": q.Service, "created": q.Created, "deadline": q.Deadline,
		"buyers": q.Buyers, "price": q.PriceCents}
	for _, s := range sqlSeedQueued {
		if _, err := db.Exec(ctx, s, args); err != nil {
			return &SeedError{SQL: s, Err: err}
		}
	}
	return nil
}

// SeedDevices adds workers x devices offline devices, BenchDevice(w, i),
// offering service with slots slots. A failure is a *SeedError.
func SeedDevices(ctx context.Context, db DB, workers, devices int, service string, slots int) error {
	if _, err := db.Exec(ctx, sqlSeedDevices, workers, devices, service, slots); err != nil {
		return &SeedError{SQL: sqlSeedDevices, Err: err}
	}
	return nil
}

// Pgbench is one run of the lease script with Clients clients (and
// threads) for Seconds seconds on the seeded database at URL.
type Pgbench struct {
	Bin, Script, URL string
	Clients, Seconds int
	Slots            int // the script's -D slots
}

// PgbenchError is a pgbench run that failed with queued jobs left.
type PgbenchError struct {
	Args   []string // pgbench's arguments
	Err    error
	Output []byte
}

func (e *PgbenchError) Error() string { return fmt.Sprintf("pgbench: %v\n%s", e.Err, e.Output) }
func (e *PgbenchError) Unwrap() error { return e.Err }

// PgbenchRun is what one pgbench run measured.
type PgbenchRun struct {
	TPS          float64
	Transactions int64 // "number of transactions actually processed"
	// CPU is pgbench's own user + system time (its clients' side; the
	// backends' is Postgres's).
	CPU time.Duration
	// Queued is how many jobs were left queued after it: 0 means the run
	// went dry and its figures are void.
	Queued int
}

// RunPgbench runs p on its database (over the same TCP endpoint as db's,
// with -D n=0 starting each client's lease counter), then counts the jobs
// still queued through db. Queued == 0 means the run went dry and its
// figures are void (no error). A failed run is a *PgbenchError. Checking
// the rows is the caller's.
func RunPgbench(ctx context.Context, db DB, p Pgbench) (PgbenchRun, error) {
	var run PgbenchRun
	cc, err := pgconn.ParseConfig(p.URL)
	if err != nil {
		return run, err
	}
	args := []string{"-n", "-f", p.Script, "-c", strconv.Itoa(p.Clients), "-j", strconv.Itoa(p.Clients),
		"-T", strconv.Itoa(p.Seconds), "-D", "slots=" + strconv.Itoa(p.Slots), "-D", "n=0",
		"-h", cc.Host, "-p", strconv.Itoa(int(cc.Port)), "-U", cc.User, cc.Database}
	cmd := exec.CommandContext(ctx, p.Bin, args...)
	cmd.Env = os.Environ()
	if cc.Password != "" {
		cmd.Env = append(cmd.Env, "PGPASSWORD="+cc.Password)
	}
	if cc.TLSConfig == nil { // sslmode=disable in the URL
		cmd.Env = append(cmd.Env, "PGSSLMODE=disable")
	}
	out, runErr := cmd.CombinedOutput()
	if ps := cmd.ProcessState; ps != nil {
		run.CPU = ps.UserTime() + ps.SystemTime()
	}
	if err := db.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'queued'`).Scan(&run.Queued); err != nil {
		return run, err
	}
	if run.Queued == 0 {
		return run, nil
	}
	if runErr != nil {
		return run, &PgbenchError{Args: args, Err: runErr, Output: out}
	}
	m, n := pgbenchTPS.FindSubmatch(out), pgbenchTx.FindSubmatch(out)
	if m == nil || n == nil {
		return run, fmt.Errorf("pgbench printed no tps or transaction count line:\n%s", out)
	}
	if run.TPS, err = strconv.ParseFloat(string(m[1]), 64); err != nil {
		return run, err
	}
	if run.Transactions, err = strconv.ParseInt(string(n[1]), 10, 64); err != nil {
		return run, err
	}
	return run, nil
}

// runPgbench seeds a fresh clone of the migrated template and runs the
// lease script on it; a run that leases every seeded job is repeated with
// four times as many.
func runPgbench(ctx context.Context, pg *pgprovider.Provider, cfg Config) PgbenchResult {
	r := PgbenchResult{Clients: cfg.PgbenchClients, Seconds: cfg.PgbenchSeconds}
	bin, err := FindPgbench()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	script, err := FindScript(cfg.PgbenchScript)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	fmt.Fprintf(cfg.Log, "bench: pgbench -c %d -T %d %s\n", r.Clients, r.Seconds, script)
	for jobs := PgbenchJobs; jobs <= 16*PgbenchJobs; jobs *= 4 {
		run, cpu, err := pgbenchOnce(ctx, pg, bin, script, r.Clients, r.Seconds, jobs)
		if err != nil {
			r.Error = err.Error()
			return r
		}
		if run.Queued > 0 {
			r.TPS, r.CPU = run.TPS, cpu
			return r
		}
	}
	r.Error = "pgbench leased every seeded job each time"
	return r
}

// pgbenchOnce is one pgbench run on a fresh seeded database and its CPU
// time per transaction, measured like the stack's (cpuMeter); a run that
// went dry (Queued 0) is void.
func pgbenchOnce(ctx context.Context, pg *pgprovider.Provider, bin, script string, clients, seconds, jobs int) (PgbenchRun, *PgbenchCPU, error) {
	var run PgbenchRun
	url, err := pg.NewDatabase(ctx, targets.TemplateName)
	if err != nil {
		return run, nil, err
	}
	defer func() { _ = pg.DropDatabase(context.WithoutCancel(ctx), url) }()
	pool, err := store.OpenPool(ctx, url)
	if err != nil {
		return run, nil, err
	}
	defer pool.Close()
	q := Queued{Jobs: jobs, Buyers: SeedBuyers, Service: benchService, PriceCents: 10,
		Created: SeedCreated, Deadline: SeedDeadline}
	if err := SeedQueued(ctx, pool, q); err != nil {
		return run, nil, fmt.Errorf("seed: %w", err)
	}
	if err := SeedDevices(ctx, pool, clients, jobs/Slots+1, benchService, Slots); err != nil {
		return run, nil, fmt.Errorf("seed devices: %w", err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE"); err != nil {
		return run, nil, err
	}
	m := startCPU(ctx, pool, 0)
	run, err = RunPgbench(ctx, pool, Pgbench{Bin: bin, Script: script, URL: url,
		Clients: clients, Seconds: seconds, Slots: Slots})
	cpu := pgbenchCPU(m, run)
	if err != nil || run.Queued == 0 {
		return run, nil, err
	}
	if v, err := store.CheckInvariants(ctx, pool); err != nil {
		return run, nil, err
	} else if len(v) > 0 {
		return run, nil, fmt.Errorf("pgbench left %d invariant violations, first: %v", len(v), v[0])
	}
	return run, cpu, nil
}

// pgbenchCPU is run's CPU time per transaction: the backends' (its
// connections exit with it, so the postmaster's reaped time holds them)
// and pgbench's own.
func pgbenchCPU(m *cpuMeter, run PgbenchRun) *PgbenchCPU {
	d, window, err := m.since()
	if err == nil && run.Transactions <= 0 {
		err = errors.New("no transactions")
	}
	if err != nil {
		return &PgbenchCPU{Error: err.Error()}
	}
	n := float64(run.Transactions)
	return &PgbenchCPU{PostgresMS: ms(d.postgres) / n, PgbenchMS: ms(run.CPU) / n,
		Busy: float64(d.postgres+run.CPU) / float64(window)}
}

// FindScript returns the given path (absolute), else
// server/testdata/lease.pgbench looked for from the working directory
// upwards.
func FindScript(given string) (string, error) {
	if given != "" {
		if _, err := os.Stat(given); err != nil {
			return "", err
		}
		return filepath.Abs(given)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "server", "testdata", "lease.pgbench")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("server/testdata/lease.pgbench not found from the working directory up (run from the module, or pass its path)")
		}
		dir = parent
	}
}

// FindPgbench looks on PATH, then in the distribution's server directories
// (PostgreSQL 15 first).
func FindPgbench() (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	cands := []string{"/usr/lib/postgresql/15/bin/pgbench"}
	others, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	for i := len(others) - 1; i >= 0; i-- {
		cands = append(cands, others[i])
	}
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return c, nil
		}
	}
	return "", errors.New("pgbench not found on PATH or in /usr/lib/postgresql/*/bin")
}
