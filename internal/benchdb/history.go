package benchdb

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// History is what SeedHistory writes into a migrated database whose buyers
// and devices exist already: Finished jobs that ended over the Span before
// Now, each with the rows the service would have left (attempts, journal,
// its settled hold and its delivered terminal webhook), then Queued jobs
// created just before Now (held hold, insert journal row), all spread over
// Buyers and, for attempts, Devices.
type History struct {
	Finished, Queued int
	Buyers, Devices  []string
	Service          string
	PriceCents       int64
	Now              time.Time
	Span             time.Duration
	// Chunk is how many finished jobs one set of statements writes
	// (0: 250,000); Progress hears each chunk's end.
	Chunk int
	// Workers is how many connections write at once (0: one).
	Workers  int
	Progress func(done int, rows int64)
}

// HistoryStats is what a seed wrote and how long it took.
type HistoryStats struct {
	Rows map[string]int64 `json:"rows"`
	// TableSeconds is the time each table's inserts took.
	TableSeconds map[string]float64 `json:"table_seconds"`
	Total        int64              `json:"rows_total"`
	Seconds      float64            `json:"seconds"`
	// IndexSeconds is the part spent rebuilding the secondary indexes.
	IndexSeconds float64 `json:"index_seconds"`
	RowsPerS     float64 `json:"rows_per_s"`
}

// historyTables are the tables SeedHistory writes, whose secondary
// indexes it drops for the load and rebuilds after (one sorted build is
// many times faster than as many insertions).
var historyTables = []string{"jobs", "job_attempts", "holds", "webhook_outbox", "job_events"}

// The finished jobs: i % 20 picks a job's story, as the service writes it:
// 0 cancelled while queued (no attempt), 1 failed after three attempts
// that failed runner_failed, 2 and 3 succeeded by a second attempt after a
// first lost to lease expiry, the rest (80%) succeeded by their first.
// Ids are md5-derived from i, so every table computes the same ones.
const (
	sqlHistJob     = `md5('hj' || i)::uuid`
	sqlHistAttempt = `md5('ha' || i || '.' || n)::uuid`
	// sqlHistSeries is the chunk's finished jobs with their story and
	// creation instant.
	sqlHistSeries = `(SELECT i, i % 20 AS r, @start::timestamptz + i * @step::bigint * interval '1 microsecond' AS c
	  FROM generate_series(@lo::bigint, @hi::bigint) i)`
	sqlHistAttempts = `CASE s.r WHEN 0 THEN 0 WHEN 1 THEN 3 WHEN 2 THEN 2 WHEN 3 THEN 2 ELSE 1 END`
)

var sqlHistoryChunk = []struct{ table, sql string }{
	{"jobs", `INSERT INTO jobs (id, buyer_id, service, params, input_bytes, input_sha256, max_attempts, attempt_count,
	    status, failure_code, request_fingerprint, created_at, admission_deadline, output_key, output_bytes, output_sha256,
	    succeeded_attempt_id, updated_at)
	  SELECT ` + sqlHistJob + `, (@buyers::uuid[])[1 + i % @nbuyers::int], @service, jsonb_build_object('seed', i::text),
	         1048576, md5('in' || i) || md5('in2' || i), 3, ` + sqlHistAttempts + `,
	         CASE s.r WHEN 0 THEN 'cancelled' WHEN 1 THEN 'failed' ELSE 'succeeded' END,
	         CASE s.r WHEN 1 THEN 'runner_failed' END, md5('fp' || i) || md5('fp2' || i), c, c + interval '1 day',
	         CASE WHEN s.r > 1 THEN 'outputs/' || ` + sqlHistJob + ` || '/' || n.a || '.mp4' END,
	         CASE WHEN s.r > 1 THEN 2400 END,
	         CASE WHEN s.r > 1 THEN md5('out' || i) || md5('out2' || i) END,
	         CASE WHEN s.r > 1 THEN n.a END, c + interval '30 seconds'
	  FROM ` + sqlHistSeries + ` s
	  CROSS JOIN LATERAL (SELECT md5('ha' || i || '.' || ` + sqlHistAttempts + `)::uuid AS a) n`},
	{"job_attempts", `INSERT INTO job_attempts (id, job_id, attempt_number, device_id, status, lease_epoch, commit_token_hash,
	    lease_expires_at, claimed_output_key, claimed_output_bytes, claimed_output_sha256, failure_code, created_at, ended_at, encoder)
	  SELECT ` + sqlHistAttempt + `, ` + sqlHistJob + `, n, (@devices::uuid[])[1 + (i + n) % @ndevices::int], st, 1,
	         md5('tok' || i || '.' || n) || md5('tok2' || i || '.' || n), a + interval '5 minutes',
	         CASE WHEN st = 'succeeded' THEN 'outputs/' || ` + sqlHistJob + ` || '/' || ` + sqlHistAttempt + ` || '.mp4' END,
	         CASE WHEN st = 'succeeded' THEN 2400 END,
	         CASE WHEN st = 'succeeded' THEN md5('out' || i) || md5('out2' || i) END,
	         CASE st WHEN 'failed' THEN 'runner_failed' WHEN 'lost' THEN 'lease_expired' END,
	         a, a + interval '8 seconds', CASE WHEN st = 'succeeded' THEN 'libx264' END
	  FROM (SELECT i, n, c + n * interval '10 seconds' AS a,
	               CASE WHEN s.r = 1 THEN 'failed' WHEN s.r IN (2, 3) AND n = 1 THEN 'lost' ELSE 'succeeded' END AS st
	        FROM ` + sqlHistSeries + ` s CROSS JOIN LATERAL generate_series(1, ` + sqlHistAttempts + `) n) t`},
	{"holds", `INSERT INTO holds (job_id, buyer_id, amount_cents, status, created_at, settled_at)
	  SELECT ` + sqlHistJob + `, (@buyers::uuid[])[1 + i % @nbuyers::int], @price,
	         CASE WHEN s.r < 2 THEN 'released' ELSE 'captured' END, c, c + interval '30 seconds'
	  FROM ` + sqlHistSeries + ` s`},
	{"webhook_outbox", `INSERT INTO webhook_outbox (job_id, event, payload, created_at, attempts, next_attempt_at, delivered_at)
	  SELECT ` + sqlHistJob + `, st, jsonb_build_object('event', st, 'job_id', ` + sqlHistJob + `, 'status', st, 'at', c + interval '30 seconds'),
	         c + interval '30 seconds', 1, c + interval '30 seconds', c + interval '31 seconds'
	  FROM (SELECT s.*, CASE s.r WHEN 0 THEN 'cancelled' WHEN 1 THEN 'failed' ELSE 'succeeded' END AS st
	        FROM ` + sqlHistSeries + ` s) t`},
	// Each job's journal in its own order (the sort keeps every entity's
	// rows in the order of their ids, as the replay reads them).
	{"job_events", `INSERT INTO job_events (kind, job_id, attempt_id, from_status, to_status, code, actor, at)
	  SELECT e.kind, ` + sqlHistJob + `, CASE WHEN e.n > 0 THEN md5('ha' || i || '.' || e.n)::uuid END, e.f, e.t, e.code, e.actor,
	         c + e.ms * interval '1 millisecond'
	  FROM (SELECT s.*, CASE s.r WHEN 0 THEN 'c' WHEN 1 THEN 'f' WHEN 2 THEN 'l' WHEN 3 THEN 'l' ELSE 's' END AS story
	        FROM ` + sqlHistSeries + ` s) s
	  JOIN (VALUES ` + journalStories() + `) e(story, step, kind, n, f, t, code, actor, ms) ON e.story = s.story
	  ORDER BY i, e.step`},
}

// journalStories is the journal of each story as VALUES rows: (story,
// step, kind, attempt number, from, to, code, actor, ms after creation).
func journalStories() string {
	type ev struct {
		kind     string
		n        int
		from, to string
		code     string
		actor    string
	}
	job := func(from, to, code, actor string) ev { return ev{"job", 0, from, to, code, actor} }
	att := func(n int, from, to, code, actor string) ev { return ev{"attempt", n, from, to, code, actor} }
	lease := func(n int) []ev {
		return []ev{job("queued", "active", "", "matcher"), att(n, "", "leased", "", "matcher")}
	}
	success := func(n int) []ev {
		return append(lease(n), att(n, "leased", "uploading", "", "device"), att(n, "uploading", "committing", "", "device"),
			job("active", "verifying", "", "device"), att(n, "committing", "succeeded", "", "verifier"),
			job("verifying", "succeeded", "", "verifier"))
	}
	insert := job("", "queued", "", "buyer")
	stories := map[string][]ev{
		"c": {insert, job("queued", "cancelled", "buyer_cancelled", "buyer")},
		"s": append([]ev{insert}, success(1)...),
		"l": append(append(append([]ev{insert}, lease(1)...), att(1, "leased", "lost", "lease_expired", "sweeper"),
			job("active", "queued", "lease_expired", "sweeper")), success(2)...),
	}
	f := []ev{insert}
	for n := 1; n <= 3; n++ {
		f = append(append(f, lease(n)...), att(n, "leased", "running", "", "device"), att(n, "running", "failed", "runner_failed", "device"))
		if n < 3 {
			f = append(f, job("active", "queued", "runner_failed", "device"))
		} else {
			f = append(f, job("active", "failed", "runner_failed", "device"))
		}
	}
	stories["f"] = f
	var rows []string
	for _, story := range []string{"c", "f", "l", "s"} {
		for step, e := range stories[story] {
			from := "NULL::text"
			if e.from != "" {
				from = "'" + e.from + "'"
			}
			rows = append(rows, fmt.Sprintf("('%s', %d, '%s', %d, %s, '%s', '%s', '%s', %d)",
				story, step, e.kind, e.n, from, e.to, e.code, e.actor, 1000*step))
		}
	}
	return strings.Join(rows, ", ")
}

// The queued jobs, newest of all, created 10 ms apart up to Now.
var sqlHistoryQueued = []struct{ table, sql string }{
	{"jobs", `INSERT INTO jobs (id, buyer_id, service, params, input_bytes, input_sha256, max_attempts, attempt_count,
	    status, request_fingerprint, created_at, admission_deadline, updated_at)
	  SELECT md5('qj' || i)::uuid, (@buyers::uuid[])[1 + i % @nbuyers::int], @service, jsonb_build_object('seed', i::text),
	         1048576, md5('in' || i) || md5('in2' || i), 3, 0, 'queued', md5('qfp' || i) || md5('qfp2' || i),
	         @now::timestamptz - (@queued::int - i) * interval '10 milliseconds', '2100-01-01',
	         @now::timestamptz - (@queued::int - i) * interval '10 milliseconds'
	  FROM generate_series(1, @queued::int) i`},
	{"holds", `INSERT INTO holds (job_id, buyer_id, amount_cents, status, created_at)
	  SELECT md5('qj' || i)::uuid, (@buyers::uuid[])[1 + i % @nbuyers::int], @price, 'held',
	         @now::timestamptz - (@queued::int - i) * interval '10 milliseconds'
	  FROM generate_series(1, @queued::int) i`},
	{"job_events", `INSERT INTO job_events (kind, job_id, from_status, to_status, actor, at)
	  SELECT 'job', md5('qj' || i)::uuid, NULL, 'queued', 'buyer', @now::timestamptz - (@queued::int - i) * interval '10 milliseconds'
	  FROM generate_series(1, @queued::int) i`},
}

// sqlHistoryBuyers books every seeded hold on its buyer: a captured hold
// is captured money, a held one is money out of the balance, both part of
// what the buyer started with (invariant 7).
const sqlHistoryBuyers = `UPDATE buyers b SET captured_cents = b.captured_cents + h.captured,
	    initial_cents = b.initial_cents + h.captured + h.held
	  FROM (SELECT buyer_id, coalesce(sum(amount_cents) FILTER (WHERE status = 'captured'), 0) AS captured,
	               coalesce(sum(amount_cents) FILTER (WHERE status = 'held'), 0) AS held
	        FROM holds GROUP BY buyer_id) h
	  WHERE b.id = h.buyer_id`

// sqlSecondaryIndexes are the seeded tables' indexes that back no
// constraint, with their definitions.
const sqlSecondaryIndexes = `SELECT quote_ident(ic.relname), pg_get_indexdef(i.indexrelid)
	FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class ic ON ic.oid = i.indexrelid
	WHERE t.relnamespace = 'public'::regnamespace AND t.relname = ANY ($1)
	  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
	ORDER BY 1`

// SeedHistory writes h into the database at url, whose user must be a
// superuser (status triggers and foreign keys are off for the load:
// session_replication_role = replica; the rows are built consistent by
// hand, and CHECK constraints still hold them), over h.Workers
// connections at once. The tables' secondary indexes are dropped for the
// load and rebuilt with their own definitions; then everything is vacuumed
// and analysed, as autovacuum would have. A failing statement is a
// *SeedError.
func SeedHistory(ctx context.Context, url string, h History) (HistoryStats, error) {
	began := time.Now()
	st := HistoryStats{Rows: map[string]int64{}, TableSeconds: map[string]float64{}}
	if len(h.Buyers) == 0 || (h.Finished > 0 && len(h.Devices) == 0) {
		return st, fmt.Errorf("seed history: %d buyers and %d devices: want at least one of each", len(h.Buyers), len(h.Devices))
	}
	workers := max(1, h.Workers)
	conns := make([]*pgx.Conn, workers)
	for i := range conns {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return st, err
		}
		defer c.Close(context.WithoutCancel(ctx))
		for _, s := range []string{`SET session_replication_role = replica`, `SET synchronous_commit = off`,
			`SET work_mem = '256MB'`, `SET maintenance_work_mem = '512MB'`} {
			if _, err := c.Exec(ctx, s); err != nil {
				return st, &SeedError{SQL: s, Err: err}
			}
		}
		conns[i] = c
	}
	type task struct {
		table, sql string
		args       pgx.NamedArgs
	}
	var mu sync.Mutex
	// run runs every task over the connections, at most one task a
	// connection at once, and books rows and time by table.
	run := func(tasks []task) error {
		ch := make(chan task)
		g, gctx := errgroup.WithContext(ctx)
		for _, c := range conns {
			g.Go(func() error {
				for t := range ch {
					t0 := time.Now()
					tag, err := c.Exec(gctx, t.sql, t.args)
					if err != nil {
						return &SeedError{SQL: t.sql, Err: err}
					}
					mu.Lock()
					st.Rows[t.table] += tag.RowsAffected()
					st.Total += tag.RowsAffected()
					st.TableSeconds[t.table] += time.Since(t0).Seconds()
					mu.Unlock()
				}
				return nil
			})
		}
		g.Go(func() error {
			defer close(ch)
			for _, t := range tasks {
				select {
				case ch <- t:
				case <-gctx.Done():
					return nil
				}
			}
			return nil
		})
		return g.Wait()
	}
	rows, err := conns[0].Query(ctx, sqlSecondaryIndexes, historyTables)
	if err != nil {
		return st, &SeedError{SQL: sqlSecondaryIndexes, Err: err}
	}
	type index struct{ Name, Def string }
	idx, err := pgx.CollectRows(rows, pgx.RowToStructByPos[index])
	if err != nil {
		return st, &SeedError{SQL: sqlSecondaryIndexes, Err: err}
	}
	for _, ix := range idx {
		if _, err := conns[0].Exec(ctx, `DROP INDEX `+ix.Name); err != nil {
			return st, &SeedError{SQL: `DROP INDEX ` + ix.Name, Err: err}
		}
	}
	chunk := h.Chunk
	if chunk <= 0 {
		chunk = 250_000
	}
	span := h.Span
	if span <= 0 {
		span = 365 * 24 * time.Hour
	}
	args := pgx.NamedArgs{"buyers": h.Buyers, "nbuyers": len(h.Buyers), "devices": h.Devices, "ndevices": len(h.Devices),
		"service": h.Service, "price": h.PriceCents, "start": h.Now.Add(-span - time.Hour), "now": h.Now, "queued": h.Queued,
		"step": max(int64(1), span.Microseconds()/int64(max(1, h.Finished)))}
	var tasks []task
	for lo := 1; lo <= h.Finished; lo += chunk {
		for _, s := range sqlHistoryChunk {
			a := pgx.NamedArgs{"lo": lo, "hi": min(h.Finished, lo+chunk-1)}
			for k, v := range args {
				a[k] = v
			}
			tasks = append(tasks, task{s.table, s.sql, a})
		}
	}
	// Progress is told after every workers' worth of chunks.
	per := len(sqlHistoryChunk)
	for i := 0; i < len(tasks); i += per * workers {
		if err := run(tasks[i:min(len(tasks), i+per*workers)]); err != nil {
			return st, err
		}
		if h.Progress != nil {
			h.Progress(min(h.Finished, (i/per+workers)*chunk), st.Total)
		}
	}
	// The queue after the whole history, as a live farm has it: its
	// creation rows are the journal's newest.
	if h.Queued > 0 {
		var queued []task
		for _, s := range sqlHistoryQueued {
			queued = append(queued, task{s.table, s.sql, args})
		}
		if err := run(queued); err != nil {
			return st, err
		}
	}
	if _, err := conns[0].Exec(ctx, sqlHistoryBuyers); err != nil {
		return st, &SeedError{SQL: sqlHistoryBuyers, Err: err}
	}
	t0 := time.Now()
	var builds []task
	for _, ix := range idx {
		builds = append(builds, task{"index", ix.Def, nil})
	}
	if err := run(builds); err != nil {
		return st, err
	}
	st.IndexSeconds = time.Since(t0).Seconds()
	var vacuums []task
	for _, t := range append(historyTables, "buyers") {
		vacuums = append(vacuums, task{"vacuum", `VACUUM (ANALYZE) ` + t, nil})
	}
	if err := run(vacuums); err != nil {
		return st, err
	}
	if _, err := conns[0].Exec(ctx, `CHECKPOINT`); err != nil {
		return st, &SeedError{SQL: `CHECKPOINT`, Err: err}
	}
	delete(st.Rows, "index")
	delete(st.Rows, "vacuum")
	st.Seconds = time.Since(began).Seconds()
	if st.Seconds > 0 {
		st.RowsPerS = float64(st.Total) / st.Seconds
	}
	return st, nil
}
