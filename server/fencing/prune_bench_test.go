package fencing_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rendermac/rendermac/internal/benchdb"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
)

// sqlSeedFinished seeds $1 finished jobs of buyer $2 (the first
// statement), each with one attempt on device $2 (the second) that failed
// (runner_failed) and the job failed after it, created at $3 + i ms: the rows a finished job has (job, attempt, four
// journal rows, a released hold, a terminal webhook), written through the
// transitions the triggers allow.
var sqlSeedFinished = []string{`
INSERT INTO jobs (id, buyer_id, service, input_bytes, input_sha256, max_attempts, attempt_count, status,
                  request_fingerprint, created_at, admission_deadline, updated_at)
SELECT ('00000000-0000-4000-9000-' || lpad(to_hex(i), 12, '0'))::uuid, $2, 'synthetic.mp4', 10, repeat('a', 64), 3, 1,
       'queued', repeat('b', 64), $3::timestamptz + i * interval '1 ms', $3::timestamptz + interval '1 day', $3
FROM generate_series(1, $1::int) i`, `
INSERT INTO job_attempts (id, job_id, attempt_number, device_id, status, lease_epoch, commit_token_hash, lease_expires_at, created_at)
SELECT ('00000000-0000-4000-a000-' || lpad(to_hex(i), 12, '0'))::uuid, ('00000000-0000-4000-9000-' || lpad(to_hex(i), 12, '0'))::uuid,
       1, $2, 'leased', 1, lpad(to_hex(i), 64, '0'), $3::timestamptz + interval '1 hour', $3
FROM generate_series(1, $1::int) i`,
	`UPDATE job_attempts SET status = 'failed', failure_code = 'runner_failed', ended_at = $1`,
	`UPDATE jobs SET status = 'failed', failure_code = 'runner_failed', updated_at = $1`, `
INSERT INTO holds (job_id, buyer_id, amount_cents, status, created_at, settled_at)
SELECT id, buyer_id, 10, 'released', created_at, $1 FROM jobs`, `
INSERT INTO webhook_outbox (job_id, event, payload, created_at, next_attempt_at, delivered_at)
SELECT id, 'failed', '{}', $1, $1, $1 FROM jobs`, `
INSERT INTO job_events (kind, job_id, attempt_id, from_status, to_status, code, actor, at)
SELECT k.kind, j.id, CASE WHEN k.kind = 'attempt' THEN a.id END, k.f, k.t, k.c, k.actor, j.created_at + k.o
FROM jobs j JOIN job_attempts a ON a.job_id = j.id,
     (VALUES ('job', NULL, 'queued', '', 'buyer', interval '0'),
             ('attempt', NULL, 'leased', '', 'matcher', interval '1 ms'),
             ('attempt', 'leased', 'failed', 'runner_failed', 'device', interval '2 ms'),
             ('job', 'queued', 'failed', 'runner_failed', 'device', interval '3 ms')) k(kind, f, t, c, actor, o)
ORDER BY j.created_at, k.o`,
	`ANALYZE`}

// BenchmarkPruneFinished prunes N seeded finished jobs (N from
// RENDERMAC_PRUNE_BENCH_JOBS, default 10,000), each with an attempt, four
// journal rows, a hold and a webhook row, in the default batches, and
// reports jobs and rows removed per second. Seeding is not timed.
func BenchmarkPruneFinished(b *testing.B) {
	n := 10_000
	if v := os.Getenv("RENDERMAC_PRUNE_BENCH_JOBS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("RENDERMAC_PRUNE_BENCH_JOBS=%q: want a positive count", v)
		}
	}
	ctx := context.Background()
	var jobs, rows int64
	var took time.Duration
	for b.Loop() {
		b.StopTimer()
		d := newBenchDB(b, 4)
		buyer, device := benchdb.Buyer(0), benchdb.Device(0, 0)
		d.exec(b, `INSERT INTO buyers (id, name, balance_cents, captured_cents, initial_cents) VALUES ($1, 'b', 0, 0, $2)`, buyer, 10*n)
		d.exec(b, `INSERT INTO devices (id, name, services, slots_total) VALUES ($1, 'd', '{synthetic.mp4}', 1)`, device)
		d.exec(b, sqlSeedFinished[0], n, buyer, t0)
		d.exec(b, sqlSeedFinished[1], n, device, t0)
		for _, q := range sqlSeedFinished[2:6] {
			d.exec(b, q, t0.Add(time.Minute))
		}
		d.exec(b, sqlSeedFinished[6])
		d.exec(b, `UPDATE buyers SET balance_cents = initial_cents`)
		d.exec(b, sqlSeedFinished[7])
		svc := fencing.NewService(d.pool, nil, protocol.RandomIDs{}, fencing.Config{})
		b.StartTimer()
		start := time.Now()
		st, err := svc.PruneFinished(ctx, t0.Add(48*time.Hour), 0)
		took += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if st.Jobs != int64(n) {
			b.Fatalf("pruned %d jobs of %d", st.Jobs, n)
		}
		jobs += st.Jobs
		rows += st.Jobs + st.Attempts + st.Events + st.Holds + st.Webhooks
	}
	b.ReportMetric(float64(jobs)/took.Seconds(), "jobs/s")
	b.ReportMetric(float64(rows)/took.Seconds(), "rows/s")
}
