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
	JobsByStatus    map[string]int64   // every job status, zero included
	QueuedByService map[string]int64   // services with a queued job
	OldestQueuedAge map[string]float64 // seconds since the oldest queued job of a service was created
	DevicesOnline   int64
	LiveAttempts    int64
}

// sqlGauges are the gauges' statements, one batch (one round trip). The
// queued ones and the live attempts read partial indexes (jobs_queued_idx,
// job_attempts_live_device_idx); jobs by status counts the whole jobs table,
// the one statement whose cost grows with history.
var sqlGauges = []string{
	`SELECT status, count(*) FROM jobs GROUP BY status`,
	`SELECT service, count(*), extract(epoch FROM coalesce($1::timestamptz, now()) - min(created_at))::float8
	 FROM jobs WHERE status = '` + string(protocol.JobQueued) + `' GROUP BY service`,
	`SELECT count(*) FROM devices WHERE status = '` + string(protocol.DeviceOnline) + `'`,
	`SELECT count(*) FROM job_attempts WHERE ` + SQLUnended + ` AND status IN ` + SQLLiveStatuses,
}

// UnendedJobStatuses are the job statuses before a terminal one:
// ReadQueueGauges counts only these, through jobs_unended_idx.
var UnendedJobStatuses = []protocol.JobStatus{protocol.JobQueued, protocol.JobActive, protocol.JobVerifying, protocol.JobCancelling}

// sqlUnendedJobs counts jobs by unended status (jobs_unended_idx, migration
// 00006: its cost is the unended jobs', not the history's).
var sqlUnendedJobs = `SELECT status, count(*) FROM jobs WHERE status IN ('` + string(protocol.JobQueued) + `', '` +
	string(protocol.JobActive) + `', '` + string(protocol.JobVerifying) + `', '` + string(protocol.JobCancelling) + `') GROUP BY status`

type batcher interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}

// ReadGauges reads the gauges at now (zero: the database's clock).
func ReadGauges(ctx context.Context, q batcher, now time.Time) (Gauges, error) {
	return readGauges(ctx, q, now, sqlGauges[0], protocol.JobStatuses)
}

// ReadQueueGauges is ReadGauges with JobsByStatus for UnendedJobStatuses
// only, so that its cost does not grow with history (the console's queue
// page).
func ReadQueueGauges(ctx context.Context, q batcher, now time.Time) (Gauges, error) {
	return readGauges(ctx, q, now, sqlUnendedJobs, UnendedJobStatuses)
}

func readGauges(ctx context.Context, q batcher, now time.Time, byStatus string, statuses []protocol.JobStatus) (Gauges, error) {
	g := Gauges{JobsByStatus: map[string]int64{}, QueuedByService: map[string]int64{}, OldestQueuedAge: map[string]float64{}}
	for _, s := range statuses {
		g.JobsByStatus[string(s)] = 0
	}
	b := &pgx.Batch{}
	b.Queue(byStatus).Query(func(rows pgx.Rows) error {
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
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return Gauges{}, fmt.Errorf("read gauges: %w", err)
	}
	return g, nil
}
