package benchdb

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// Slots is every bench device's slot count, the script's -D slots:
	// client w's k-th lease uses device Device(w, k/Slots), so no
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
)

// ID is the uuid the seeding SQL gives bench devices and buyers:
// 00000000-0000-4000-8000-<x as 12 hex digits>.
func ID(x int64) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", x) }

// Device is worker (pgbench client) w's i-th seeded device; the SQL
// and the pgbench script compute the same id.
func Device(w, i int) string { return ID(int64(w)<<24 + int64(i)) }

// SeedBuyerBase is the number ID gives the first seeded buyer.
const SeedBuyerBase = 0xb00000000

// Buyer is the k-th seeded buyer (0 <= k < Queued.Buyers).
func Buyer(k int) string { return ID(SeedBuyerBase + int64(k)) }

// sqlBenchID is ID in SQL.
const sqlBenchID = `('00000000-0000-4000-8000-' || lpad(to_hex(%s), 12, '0'))::uuid`

// sqlSeedQueued fills a migrated database the way CreateJob would have:
// @jobs queued jobs of @service (created @created + i µs, deadline
// @deadline) over @buyers buyers, each with a held hold of @price cents and
// its journal row, the buyers' balances and initial amounts conserving the
// holds.
var sqlSeedQueued = []string{
	`INSERT INTO buyers (id, name, balance_cents, captured_cents, initial_cents)
	 SELECT ` + fmt.Sprintf(sqlBenchID, fmt.Sprint(SeedBuyerBase)+` + k`) + `, 'bench', 1000, 0, 1000
	 FROM generate_series(0, @buyers::int - 1) k`,
	`INSERT INTO jobs (id, buyer_id, service, params, input_bytes, input_sha256, max_attempts, attempt_count,
	                   status, request_fingerprint, created_at, admission_deadline, updated_at)
	 SELECT gen_random_uuid(), ` + fmt.Sprintf(sqlBenchID, fmt.Sprint(SeedBuyerBase)+` + i % @buyers::int`) + `, @service, '{}', 10,
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

// sqlSeedDevices adds $1 workers x $2 devices (Device(w, i)) offering
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

// SeedDevices adds workers x devices offline devices, Device(w, i),
// offering service with slots slots. A failure is a *SeedError.
func SeedDevices(ctx context.Context, db DB, workers, devices int, service string, slots int) error {
	if _, err := db.Exec(ctx, sqlSeedDevices, workers, devices, service, slots); err != nil {
		return &SeedError{SQL: sqlSeedDevices, Err: err}
	}
	return nil
}
