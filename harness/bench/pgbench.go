package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/rendermac/rendermac/internal/benchdb"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/server/store"
)

// The pgbench comparison runs server/fencing/testdata/lease.pgbench on a database
// seeded in bulk by internal/benchdb, the copy server/fencing/bench_test.go also uses.

// runPgbench seeds a fresh clone of the migrated template and runs the
// lease script on it; a run that leases every seeded job is repeated with
// four times as many.
func runPgbench(ctx context.Context, pg *pgprovider.Provider, cfg Config) PgbenchResult {
	r := PgbenchResult{Clients: cfg.PgbenchClients, Seconds: cfg.PgbenchSeconds}
	bin, err := benchdb.FindPgbench()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	script, err := benchdb.FindScript(cfg.PgbenchScript)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	fmt.Fprintf(cfg.Log, "bench: pgbench -c %d -T %d %s\n", r.Clients, r.Seconds, script)
	for jobs := benchdb.PgbenchJobs; jobs <= 16*benchdb.PgbenchJobs; jobs *= 4 {
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
// went dry (benchdb.Queued 0) is void.
func pgbenchOnce(ctx context.Context, pg *pgprovider.Provider, bin, script string, clients, seconds, jobs int) (benchdb.PgbenchRun, *PgbenchCPU, error) {
	var run benchdb.PgbenchRun
	url, pool, release, err := openClone(ctx, pg)
	if err != nil {
		return run, nil, err
	}
	defer release()
	q := benchdb.Queued{Jobs: jobs, Buyers: benchdb.SeedBuyers, Service: benchService, PriceCents: 10,
		Created: benchdb.SeedCreated, Deadline: benchdb.SeedDeadline}
	if err := benchdb.SeedQueued(ctx, pool, q); err != nil {
		return run, nil, fmt.Errorf("seed: %w", err)
	}
	if err := benchdb.SeedDevices(ctx, pool, clients, jobs/benchdb.Slots+1, benchService, benchdb.Slots); err != nil {
		return run, nil, fmt.Errorf("seed devices: %w", err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE"); err != nil {
		return run, nil, err
	}
	m := startCPU(ctx, pool, 0)
	run, err = benchdb.RunPgbench(ctx, pool, benchdb.Pgbench{Bin: bin, Script: script, URL: url,
		Clients: clients, Seconds: seconds, Slots: benchdb.Slots})
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
func pgbenchCPU(m *cpuMeter, run benchdb.PgbenchRun) *PgbenchCPU {
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
