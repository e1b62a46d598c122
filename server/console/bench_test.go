package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/console"
)

// benchJobs is the size of the jobs table every console page is rendered
// against.
const benchJobs = 100_000

// benchFill bulk-loads benchJobs jobs over 20 buyers and three services
// (one a second back from t0; the newest 10% queued, as a queue's are, and
// of the older ones 10% failed, the rest cancelled),
// each with its insert and its terminal journal row, and 50 devices, in
// one statement each (generate_series). Status triggers and foreign keys
// are triggers too and are off for the load (session_replication_role =
// replica), so the rows are built consistent by hand.
func benchFill(b *testing.B, bb *bundle) {
	b.Helper()
	ctx := context.Background()
	conn, err := bb.pool.Acquire(ctx)
	require.NoError(b, err)
	defer conn.Release()
	for _, sql := range []string{
		`SET session_replication_role = replica`,
		`INSERT INTO buyers (id, name, balance_cents, initial_cents)
		 SELECT md5('buyer' || i)::uuid, 'buyer ' || i, 1000000, 1000000 FROM generate_series(1, 20) i`,
		`INSERT INTO devices (id, name, services, slots_total, status, last_seen_at, created_at)
		 SELECT md5('device' || i)::uuid, 'mac-' || i, '{synthetic.mp4,ffmpeg.h264_720p}', 2,
		        CASE WHEN i % 5 = 0 THEN 'offline' ELSE 'online' END, $1::timestamptz, $1::timestamptz
		 FROM generate_series(1, 50) i`,
		`INSERT INTO jobs (id, buyer_id, service, input_bytes, input_sha256, max_attempts, status, failure_code,
		                   request_fingerprint, created_at, admission_deadline, updated_at)
		 SELECT md5('job' || i)::uuid, md5('buyer' || (1 + i % 20))::uuid,
		        (ARRAY['synthetic.mp4', 'ffmpeg.h264_720p', 'ffmpeg.h264_1080p'])[1 + i % 3], 0, repeat('a', 64), 3,
		        CASE WHEN i > ` + fmt.Sprint(benchJobs*9/10) + ` THEN 'queued' WHEN i % 10 = 1 THEN 'failed' ELSE 'cancelled' END,
		        CASE WHEN i <= ` + fmt.Sprint(benchJobs*9/10) + ` AND i % 10 = 1 THEN 'runner_failed' END, repeat('b', 64),
		        $1::timestamptz - (` + fmt.Sprint(benchJobs) + ` - i) * interval '1 second',
		        $1::timestamptz - (` + fmt.Sprint(benchJobs) + ` - i) * interval '1 second' + interval '1 day',
		        $1::timestamptz - (` + fmt.Sprint(benchJobs) + ` - i) * interval '1 second'
		 FROM generate_series(1, ` + fmt.Sprint(benchJobs) + `) i`,
		`INSERT INTO job_events (kind, job_id, from_status, to_status, actor, at)
		 SELECT 'job', id, NULL, 'queued', 'buyer', created_at FROM jobs
		 UNION ALL
		 SELECT 'job', id, 'queued', status, CASE status WHEN 'failed' THEN 'sweeper' ELSE 'buyer' END, updated_at
		 FROM jobs WHERE status <> 'queued'
		 ORDER BY 5`,
		`RESET session_replication_role`,
		`VACUUM ANALYZE`, // what autovacuum keeps up: the visibility map index-only scans read
	} {
		args := []any{}
		if strings.Contains(sql, "$1") {
			args = append(args, t0)
		}
		_, err := conn.Exec(ctx, sql, args...)
		require.NoError(b, err, sql)
	}
}

// BenchmarkConsolePages renders each console page over a table of
// benchJobs jobs, through the console's handler (authentication, the
// queries, html/template), and reports ms per page. The jobs pages are
// keyset pages: the deepest page costs what the first does.
func BenchmarkConsolePages(b *testing.B) {
	bb := setup(b, console.Config{})
	start := time.Now()
	benchFill(b, bb)
	b.Logf("loaded %d jobs in %v", benchJobs, time.Since(start).Round(time.Millisecond))
	ctx := context.Background()
	var deep, buyer string
	require.NoError(b, bb.pool.QueryRow(ctx, `SELECT id::text FROM job_events WHERE kind = 'job' AND from_status IS NULL
		ORDER BY id DESC OFFSET 90000 LIMIT 1`).Scan(&deep))
	require.NoError(b, bb.pool.QueryRow(ctx, `SELECT md5('buyer7')::uuid::text`).Scan(&buyer))
	var someJob string
	require.NoError(b, bb.pool.QueryRow(ctx, `SELECT md5('job4242')::uuid::text`).Scan(&someJob))

	pages := []struct {
		name, path string
		rows       int // `data-job=` rows the page must hold (-1: not a jobs list)
	}{
		{"fleet", "/console/", -1},
		{"queue", "/console/queue", -1},
		{"jobs", "/console/jobs", console.DefaultPageSize},
		{"jobs_page_1801", "/console/jobs?cursor=" + url.QueryEscape(deep), console.DefaultPageSize},
		{"jobs_status_queued", "/console/jobs?status=queued", console.DefaultPageSize},
		{"jobs_buyer", "/console/jobs?buyer=" + buyer, console.DefaultPageSize},
		{"jobs_service_status", "/console/jobs?service=ffmpeg.h264_1080p&status=failed", console.DefaultPageSize},
		{"jobs_500", "/console/jobs?limit=500", 500},
		{"job", "/console/jobs/" + someJob, -1},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				w := bb.get(p.path, loopback)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", p.path, w.Code, w.Body.String())
				}
				if p.rows >= 0 {
					if n := strings.Count(w.Body.String(), "data-job="); n != p.rows {
						b.Fatalf("%s: %d rows, want %d", p.path, n, p.rows)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}
