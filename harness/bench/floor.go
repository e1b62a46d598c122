package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/benchdb"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/server/store"
)

// FloorResult is the Postgres floor of a job: the peak's statement mix
// replayed by pgbench (server/fencing/testdata/job.pgbench) at the peak's
// concurrency, and pgbench SELECT 1 at the same concurrency, the
// round-trip limit, both run just after the stack.
type FloorResult struct {
	Clients int `json:"clients"`
	Seconds int `json:"seconds"`
	// JobsPerS is the replay's jobs per second (one script run is a job).
	JobsPerS float64 `json:"replay_jobs_per_s"`
	// ReplayMix is the replay's own statements per job, read as the
	// stack's: the check that it replays the same mix.
	ReplayMix StatementMix `json:"replay_mix"`
	// CPU is the replay's CPU time per job.
	CPU *PgbenchCPU `json:"replay_cpu,omitempty"`
	// Select1TPS is the round-trip limit: SELECT 1 transactions per
	// second at the same concurrency.
	Select1TPS float64 `json:"select1_tps"`
	// Writes is the replay's row writes per job by table, from
	// pg_stat_user_tables (flushed as its connections exit): Postgres's
	// own counts, which unlike the rates do not move with the machine's
	// load. An update that is not HOT writes an entry into each index.
	Writes map[string]TableWrites `json:"writes_per_job,omitempty"`
	// Rounds pairs each round of the peak with the replay run right after
	// it, the first round's replay being the one of the figures above;
	// Ratio is the median of their stack-over-replay ratios, the figure
	// held to GoalRatioVsFloor: this machine's speed drifts within a
	// minute, so one pair is one sample of a noisy ratio.
	Rounds []FloorRound `json:"rounds,omitempty"`
	Ratio  float64      `json:"median_ratio,omitempty"`
	Error  string       `json:"error,omitempty"`
}

// TableWrites is one table's row writes per job.
type TableWrites struct {
	Inserts float64 `json:"inserts"`
	Updates float64 `json:"updates"`
	HOT     float64 `json:"hot_updates"`
	// Indexes is how many indexes the table has: a row insert or an
	// update that is not HOT writes into each (a partial one only when the
	// row is in it).
	Indexes int `json:"indexes"`
}

// writeCounts reads the write counters of the tables a job writes.
func writeCounts(ctx context.Context, pool *pgxpool.Pool) (map[string][3]int64, map[string]int, error) {
	rows, err := pool.Query(ctx, `SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd,
		(SELECT count(*) FROM pg_index i WHERE i.indrelid = s.relid)
		FROM pg_stat_user_tables s WHERE relname IN ('jobs', 'job_attempts', 'devices', 'buyers', 'holds', 'job_events', 'webhook_outbox')`)
	if err != nil {
		return nil, nil, err
	}
	out, idx := map[string][3]int64{}, map[string]int{}
	for rows.Next() {
		var name string
		var c [3]int64
		var n int
		if err := rows.Scan(&name, &c[0], &c[1], &c[2], &n); err != nil {
			return nil, nil, err
		}
		out[name], idx[name] = c, n
	}
	return out, idx, rows.Err()
}

// floorClients is the replay's concurrency: the peak's, which is its
// attempts in flight (agents x slots) but at most the server's pool
// (store.DefaultPoolMaxConns), the connections its statements share.
func floorClients(cfg Config) int { return min(cfg.Agents*cfg.Slots, store.DefaultPoolMaxConns) }

// floorRun is the replay's database: a fresh clone of the template,
// seeded (seedFloor), on which the peak's rounds each replay the mix.
type floorRun struct {
	pg               *pgprovider.Provider
	cfg              Config
	bin, script, url string
	pool             *pgxpool.Pool
	res              FloorResult
	close            func() // the pool's and the clone's release
}

// openFloor finds pgbench and job.pgbench, clones the template and seeds
// the clone at the peak's concurrency.
func openFloor(ctx context.Context, pg *pgprovider.Provider, cfg Config) (*floorRun, error) {
	f := &floorRun{pg: pg, cfg: cfg, res: FloorResult{Clients: floorClients(cfg), Seconds: cfg.PgbenchSeconds}}
	var err error
	if f.bin, err = benchdb.FindPgbench(); err != nil {
		return nil, err
	}
	if f.script, err = benchdb.FindTestdata(cfg.FloorScript, "job.pgbench"); err != nil {
		return nil, err
	}
	if f.url, f.pool, f.close, err = openClone(ctx, pg); err != nil {
		return nil, err
	}
	if err := seedFloor(ctx, f.pool, f.res.Clients); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// round replays the mix once for cfg.PgbenchSeconds and records the pair
// with the stack's round; the first round also reads the replay's own
// statement mix, row writes and CPU per job, checks SPEC section 4 over
// what it left, and runs pgbench SELECT 1 at the same concurrency.
func (f *floorRun) round(ctx context.Context, stackJobsPerS float64) error {
	r := &f.res
	first := len(r.Rounds) == 0
	var before stmtCounts
	var w0 map[string][3]int64
	var stmts *stmtReader
	if first {
		var err error
		if stmts, err = newStmtReader(ctx, f.pg.AdminURL(), f.url); err != nil {
			return err
		}
		if before, err = stmts.snapshot(ctx); err != nil {
			return err
		}
		if w0, _, err = writeCounts(ctx, f.pool); err != nil {
			return err
		}
	}
	fmt.Fprintf(f.cfg.Log, "bench: floor: pgbench -M prepared -c %d -T %d %s (round %d)\n", r.Clients, r.Seconds, f.script, len(r.Rounds)+1)
	m := startCPU(ctx, f.pool, 0)
	p := benchdb.Pgbench{Bin: f.bin, Script: f.script, URL: f.url, Clients: r.Clients, Seconds: r.Seconds, Slots: 1,
		Args: []string{"-M", "prepared"}}
	run, err := benchdb.RunPgbench(ctx, f.pool, p)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if run.Queued == 0 {
		return errors.New("replay: the seeded queue ran dry")
	}
	r.Rounds = append(r.Rounds, FloorRound{StackJobsPerS: stackJobsPerS, FloorJobsPerS: run.TPS})
	r.Ratio = medianRatio(r.Rounds)
	if !first {
		return settle(ctx, f.pool, "the replay")
	}
	r.JobsPerS, r.CPU = run.TPS, pgbenchCPU(m, run)
	after, err := stmts.snapshot(ctx)
	if err != nil {
		return err
	}
	r.ReplayMix = mix(before, after, int(run.Transactions))
	w1, idx, err := writeCounts(ctx, f.pool)
	if err != nil {
		return err
	}
	r.Writes = map[string]TableWrites{}
	n := float64(max(run.Transactions, 1))
	for t, c := range w1 {
		d := [3]int64{c[0] - w0[t][0], c[1] - w0[t][1], c[2] - w0[t][2]}
		r.Writes[t] = TableWrites{Inserts: float64(d[0]) / n, Updates: float64(d[1]) / n, HOT: float64(d[2]) / n, Indexes: idx[t]}
	}
	if v, err := store.CheckInvariants(ctx, f.pool); err != nil {
		return err
	} else if len(v) > 0 {
		return fmt.Errorf("the replay left %d invariant violations, first: %v", len(v), v[0])
	}
	fmt.Fprintf(f.cfg.Log, "bench: floor: pgbench -M prepared -c %d -T %d SELECT 1\n", r.Clients, r.Seconds)
	if r.Select1TPS, err = select1TPS(ctx, f.pool, f.bin, f.url, r.Clients, r.Seconds); err != nil {
		return err
	}
	return settle(ctx, f.pool, "the replay")
}

// settle VACUUMs the database a measured window wrote, so that the next
// window, the other side's, does not share the machine with autovacuum
// cleaning up after this one (as seedFloor vacuums the seed).
func settle(ctx context.Context, db benchdb.DB, after string) error {
	if _, err := db.Exec(ctx, "VACUUM"); err != nil {
		return fmt.Errorf("VACUUM after %s: %w", after, err)
	}
	return nil
}

// FloorRound is one round of the peak against the floor: the stack's
// whole jobs/s, then the replay's, run right after it.
type FloorRound struct {
	StackJobsPerS float64 `json:"stack_jobs_per_s"`
	FloorJobsPerS float64 `json:"floor_jobs_per_s"`
}

// medianRatio is the median over rounds of the stack's jobs/s over the
// replay's (the mean of the middle two for an even count).
func medianRatio(rounds []FloorRound) float64 {
	if len(rounds) == 0 {
		return 0
	}
	rs := make([]float64, len(rounds))
	for i, r := range rounds {
		rs[i] = r.StackJobsPerS / r.FloorJobsPerS
	}
	slices.Sort(rs)
	n := len(rs)
	if n%2 == 1 {
		return rs[n/2]
	}
	return (rs[n/2-1] + rs[n/2]) / 2
}

// select1TPS is the round-trip limit: pgbench SELECT 1 (-M prepared) with
// clients clients for seconds seconds on the database at url.
func select1TPS(ctx context.Context, db benchdb.DB, bin, url string, clients, seconds int) (float64, error) {
	sel, err := os.CreateTemp("", "rendermac-select1-*.pgbench")
	if err != nil {
		return 0, err
	}
	defer os.Remove(sel.Name())
	if _, err := sel.WriteString("SELECT 1;\n"); err != nil {
		return 0, err
	}
	if err := sel.Close(); err != nil {
		return 0, err
	}
	run, err := benchdb.RunPgbench(ctx, db, benchdb.Pgbench{Bin: bin, Script: sel.Name(), URL: url, Clients: clients,
		Seconds: seconds, Slots: 1, Args: []string{"-M", "prepared"}, NoQueue: true})
	if err != nil {
		return 0, fmt.Errorf("SELECT 1: %w", err)
	}
	return run.TPS, nil
}

// seedFloor gives the replay a queue that cannot run dry (each job it
// creates joins the queue, each it leases leaves it), one device per
// client, and per client a buyer of its own for its creates
// (Buyer(floorBuyerBase + c)), apart from the queue's, as the stack's
// creates are apart from its commits: a create holds its buyer's row lock
// over several statements, and a commit of that buyer's job waiting on it
// would be a contention the stack does not have. Every buyer gets an API
// key (the SHA-256 of its id's text, as the script computes it) and money
// for every create the run can make, added to its initial amount so that
// invariant 7 holds.
func seedFloor(ctx context.Context, pool *pgxpool.Pool, clients int) error {
	q := benchdb.Queued{Jobs: benchdb.PgbenchJobs, Buyers: benchdb.SeedBuyers, Service: benchService, PriceCents: 10,
		Created: benchdb.SeedCreated, Deadline: benchdb.SeedDeadline}
	if err := benchdb.SeedQueued(ctx, pool, q); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if err := benchdb.SeedDevices(ctx, pool, clients, 1, benchService, 1); err != nil {
		return fmt.Errorf("seed devices: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO buyers (id, name, balance_cents, captured_cents, initial_cents)
		SELECT ('00000000-0000-4000-8000-' || lpad(to_hex($1::bigint + c), 12, '0'))::uuid, 'replay', 0, 0, 0
		FROM generate_series(0, $2::int - 1) c`, benchdb.SeedBuyerBase+floorBuyerBase, clients); err != nil {
		return fmt.Errorf("seed the replay's buyers: %w", err)
	}
	for _, s := range []string{
		`UPDATE buyers SET balance_cents = balance_cents + 1000000000, initial_cents = initial_cents + 1000000000`,
		`INSERT INTO api_keys (id, buyer_id, key_hash)
		 SELECT gen_random_uuid(), id, encode(sha256(convert_to(id::text, 'UTF8')), 'hex') FROM buyers`,
		// VACUUM too, so that autovacuum has nothing of the seeding left
		// to do during the replay, whose Postgres CPU is measured.
		`VACUUM ANALYZE`,
	} {
		if _, err := pool.Exec(ctx, s); err != nil {
			return fmt.Errorf("seed the replay: %w", err)
		}
	}
	return nil
}

// floorBuyerBase is the first replay buyer's number (job.pgbench's
// "\\set buyer"), past the queue's benchdb.SeedBuyers.
const floorBuyerBase = 1000

// withClone runs f on a fresh clone of the migrated template, dropped
// after.
func withClone(ctx context.Context, pg *pgprovider.Provider, f func(url string, pool *pgxpool.Pool) error) error {
	url, pool, release, err := openClone(ctx, pg)
	if err != nil {
		return err
	}
	defer release()
	return f(url, pool)
}

// openClone makes a fresh clone of the migrated template and opens a pool
// on it; release closes the pool and drops the clone.
func openClone(ctx context.Context, pg *pgprovider.Provider) (url string, pool *pgxpool.Pool, release func(), err error) {
	if url, err = pg.NewDatabase(ctx, targets.TemplateName); err != nil {
		return "", nil, nil, err
	}
	drop := func() { _ = pg.DropDatabase(context.WithoutCancel(ctx), url) }
	if pool, err = store.OpenPool(ctx, url); err != nil {
		drop()
		return "", nil, nil, err
	}
	return url, pool, func() { pool.Close(); drop() }, nil
}
