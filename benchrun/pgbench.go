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

	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/scenarios"
	"github.com/rendermac/rendermac/server/store"
)

// The pgbench comparison reuses server/testdata/lease.pgbench and the
// seeding of server/bench_test.go (which, being test code, cannot be
// imported): the same SQL, replicated here minimally.

const (
	pgbenchSlots = 8 // bench_test.go's benchSlots, the script's -D slots
	pgbenchJobs  = 20000
	seedBuyers   = 32
)

var (
	seedCreated  = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	seedDeadline = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	pgbenchTPS   = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)
)

const seedBuyerBase = 0xb00000000

const sqlSeedID = `('00000000-0000-4000-8000-' || lpad(to_hex(%s), 12, '0'))::uuid`

// sqlSeedQueued is server/bench_test.go's sqlSeedQueued.
var sqlSeedQueued = []string{
	`INSERT INTO buyers (id, name, balance_cents, captured_cents, initial_cents)
	 SELECT ` + fmt.Sprintf(sqlSeedID, fmt.Sprint(seedBuyerBase)+` + k`) + `, 'bench', 1000, 0, 1000
	 FROM generate_series(0, @buyers::int - 1) k`,
	`INSERT INTO jobs (id, buyer_id, service, params, input_bytes, input_sha256, max_attempts, attempt_count,
	                   status, request_fingerprint, created_at, admission_deadline, updated_at)
	 SELECT gen_random_uuid(), ` + fmt.Sprintf(sqlSeedID, fmt.Sprint(seedBuyerBase)+` + i % @buyers::int`) + `, @service, '{}', 10,
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

// sqlSeedDevices is server/bench_test.go's: $1 clients x $2 devices, the
// ids lease.pgbench computes.
const sqlSeedDevices = `
INSERT INTO devices (id, name, services, slots_total, status)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(w * 16777216 + i), 12, '0'))::uuid, 'bench', ARRAY[$3::text], $4, 'offline'
FROM generate_series(0, $1::int - 1) w, generate_series(0, $2::int - 1) i`

// runPgbench seeds a fresh clone of the migrated template and runs the
// lease script on it; a run that leases every seeded job is repeated with
// four times as many.
func runPgbench(ctx context.Context, pg *pgprovider.Provider, cfg Config) PgbenchResult {
	r := PgbenchResult{Clients: cfg.PgbenchClients, Seconds: cfg.PgbenchSeconds}
	bin, err := findPgbench()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	script, err := findScript(cfg.PgbenchScript)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	fmt.Fprintf(cfg.Log, "bench: pgbench -c %d -T %d %s\n", r.Clients, r.Seconds, script)
	for jobs := pgbenchJobs; jobs <= 16*pgbenchJobs; jobs *= 4 {
		tps, dry, err := pgbenchOnce(ctx, pg, bin, script, r.Clients, r.Seconds, jobs)
		if err != nil {
			r.Error = err.Error()
			return r
		}
		if !dry {
			r.TPS = tps
			return r
		}
	}
	r.Error = "pgbench leased every seeded job each time"
	return r
}

func pgbenchOnce(ctx context.Context, pg *pgprovider.Provider, bin, script string, clients, seconds, jobs int) (float64, bool, error) {
	url, err := pg.NewDatabase(ctx, scenarios.TemplateName)
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = pg.DropDatabase(context.WithoutCancel(ctx), url) }()
	pool, err := store.OpenPool(ctx, url)
	if err != nil {
		return 0, false, err
	}
	defer pool.Close()
	args := pgx.NamedArgs{"jobs": jobs, "service": benchService, "created": seedCreated, "deadline": seedDeadline,
		"buyers": seedBuyers, "price": int64(10)}
	for _, q := range sqlSeedQueued {
		if _, err := pool.Exec(ctx, q, args); err != nil {
			return 0, false, fmt.Errorf("seed: %w", err)
		}
	}
	if _, err := pool.Exec(ctx, sqlSeedDevices, clients, jobs/pgbenchSlots+1, benchService, pgbenchSlots); err != nil {
		return 0, false, fmt.Errorf("seed devices: %w", err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE"); err != nil {
		return 0, false, err
	}
	cc, err := pgconn.ParseConfig(url)
	if err != nil {
		return 0, false, err
	}
	pargs := []string{"-n", "-f", script, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(clients),
		"-T", strconv.Itoa(seconds), "-D", "slots=" + strconv.Itoa(pgbenchSlots), "-D", "n=0",
		"-h", cc.Host, "-p", strconv.Itoa(int(cc.Port)), "-U", cc.User, cc.Database}
	cmd := exec.CommandContext(ctx, bin, pargs...)
	cmd.Env = os.Environ()
	if cc.Password != "" {
		cmd.Env = append(cmd.Env, "PGPASSWORD="+cc.Password)
	}
	if cc.TLSConfig == nil {
		cmd.Env = append(cmd.Env, "PGSSLMODE=disable")
	}
	out, runErr := cmd.CombinedOutput()
	var queued int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'queued'`).Scan(&queued); err != nil {
		return 0, false, err
	}
	if queued == 0 {
		return 0, true, nil
	}
	if runErr != nil {
		return 0, false, fmt.Errorf("pgbench: %w\n%s", runErr, out)
	}
	m := pgbenchTPS.FindSubmatch(out)
	if m == nil {
		return 0, false, fmt.Errorf("pgbench printed no tps line:\n%s", out)
	}
	tps, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return 0, false, err
	}
	if v, err := store.CheckInvariants(ctx, pool); err != nil {
		return 0, false, err
	} else if len(v) > 0 {
		return 0, false, fmt.Errorf("pgbench left %d invariant violations, first: %v", len(v), v[0])
	}
	return tps, false, nil
}

// findScript returns the given path, else server/testdata/lease.pgbench
// looked for from the working directory upwards.
func findScript(given string) (string, error) {
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

// findPgbench looks on PATH, then in the distribution's server directories.
func findPgbench() (string, error) {
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
