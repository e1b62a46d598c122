package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
)

// Gauges is the state of the queue and the fleet at one instant, for the
// scrape-time gauges of server/metrics.
type Gauges struct {
	JobsByStatus    map[string]int64   // every unended job status, zero included
	QueuedByService map[string]int64   // services with a queued job
	OldestQueuedAge map[string]float64 // seconds since the oldest queued job of a service was created
	DevicesOnline   int64
	LiveAttempts    int64
	// JobsEndedEstimate is the jobs in a terminal status as the planner's
	// statistics have them (ReadGauges only; 0 from ReadQueueGauges).
	JobsEndedEstimate int64
}

// sqlGauges are the gauges' statements, one batch (one round trip). None
// reads the history: jobs by status counts the unended jobs only
// (jobs_unended_idx, migration 00006), the queued ones and the live
// attempts read partial indexes (jobs_queued_idx,
// job_attempts_live_device_idx), and the ended jobs are estimated from
// the planner's row count of jobs (sqlJobsEstimate).
var sqlGauges = []string{
	`SELECT status, count(*) FROM jobs WHERE status IN ('` + string(protocol.JobQueued) + `', '` +
		string(protocol.JobActive) + `', '` + string(protocol.JobVerifying) + `', '` + string(protocol.JobCancelling) + `') GROUP BY status`,
	`SELECT service, count(*), extract(epoch FROM coalesce($1::timestamptz, now()) - min(created_at))::float8
	 FROM jobs WHERE status = '` + string(protocol.JobQueued) + `' GROUP BY service`,
	`SELECT count(*) FROM devices WHERE status = '` + string(protocol.DeviceOnline) + `'`,
	`SELECT count(*) FROM job_attempts WHERE ` + SQLUnended + ` AND status IN ` + SQLLiveStatuses,
}

// sqlJobsEstimate is the jobs table's row count as autovacuum or ANALYZE
// last measured it (pg_class.reltuples; -1 before the first), read in
// constant time: a count of the ended jobs would read every one of them
// at every scrape, and a counter maintained per terminal transition would
// add a write on one hot row to every job's last transaction.
const sqlJobsEstimate = `SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'jobs'::regclass`

// UnendedJobStatuses are the job statuses before a terminal one: the
// gauges count only these, through jobs_unended_idx.
var UnendedJobStatuses = []protocol.JobStatus{protocol.JobQueued, protocol.JobActive, protocol.JobVerifying, protocol.JobCancelling}

type batcher interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}

// ReadGauges reads the gauges at now (zero: the database's clock). Its
// cost is the unended jobs', the queue's and the fleet's, never the
// history's.
func ReadGauges(ctx context.Context, q batcher, now time.Time) (Gauges, error) {
	return readGauges(ctx, q, now, true)
}

// ReadQueueGauges is ReadGauges without the ended jobs' estimate (the
// console's queue page).
func ReadQueueGauges(ctx context.Context, q batcher, now time.Time) (Gauges, error) {
	return readGauges(ctx, q, now, false)
}

func readGauges(ctx context.Context, q batcher, now time.Time, estimate bool) (Gauges, error) {
	g := Gauges{JobsByStatus: map[string]int64{}, QueuedByService: map[string]int64{}, OldestQueuedAge: map[string]float64{}}
	for _, s := range UnendedJobStatuses {
		g.JobsByStatus[string(s)] = 0
	}
	b := &pgx.Batch{}
	b.Queue(sqlGauges[0]).Query(func(rows pgx.Rows) error {
		var s string
		var n int64
		_, err := pgx.ForEachRow(rows, []any{&s, &n}, func() error { g.JobsByStatus[s] = n; return nil })
		return err
	})
	b.Queue(sqlGauges[1], NowArg(now)).Query(func(rows pgx.Rows) error {
		var s string
		var n int64
		var age float64
		_, err := pgx.ForEachRow(rows, []any{&s, &n, &age}, func() error {
			g.QueuedByService[s], g.OldestQueuedAge[s] = n, age
			return nil
		})
		return err
	})
	b.Queue(sqlGauges[2]).QueryRow(func(r pgx.Row) error { return r.Scan(&g.DevicesOnline) })
	b.Queue(sqlGauges[3]).QueryRow(func(r pgx.Row) error { return r.Scan(&g.LiveAttempts) })
	var rows int64
	if estimate {
		b.Queue(sqlJobsEstimate).QueryRow(func(r pgx.Row) error { return r.Scan(&rows) })
	}
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return Gauges{}, fmt.Errorf("read gauges: %w", err)
	}
	if estimate {
		// The estimate and the exact unended count are of different
		// instants: never below zero.
		for _, n := range g.JobsByStatus {
			rows -= n
		}
		g.JobsEndedEstimate = max(0, rows)
	}
	return g, nil
}
