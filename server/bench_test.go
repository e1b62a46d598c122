package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/store"
)

// Benchmarks of the two hot transactions on the embedded cluster
// (pgprovider, started once per process and shut down by TestMain):
//
//	go test -run='^$' -bench=. -benchtime=3s ./server/
//
// Every sub-benchmark run gets a fresh database seeded with bulk SQL (queued
// jobs with their holds and journal rows, devices, for Commit also
// uploading attempts and their outputs), times only the operations, and
// checks SPEC section 4 over the rows afterwards. BenchmarkLease also runs
// testdata/lease.pgbench, the same eight statements as raw SQL, with as
// many pgbench clients as it has workers, and reports leases/s over
// pgbench's tps as ratio_vs_pgbench.

var benchWorkers = []int{1, 2, 8}

const (
	// benchSlots is every bench device's slot count; worker w's k-th lease
	// uses device benchDevice(w, k/benchSlots), so no device is ever full
	// and the live-attempt count Lease makes stays a device's real load.
	benchSlots = 8
	// benchBuyers spread the jobs, so that hold settlement (which updates
	// the buyer row) does not serialise every commit on one row.
	benchBuyers = 32
	// benchService is the catalogue's synthetic service.
	benchService = "synthetic.mp4"
	// pgbenchSeconds is pgbench's -T.
	pgbenchSeconds = 5
)

// benchNow is the instant every benchmarked operation passes; seeded jobs
// were created before it and their admission deadlines lie after it (and
// after the real clock, which the pgbench script uses).
var (
	benchNow     = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	benchCreated = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	benchDead    = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// benchID is the uuid the seeding SQL gives bench devices and buyers:
// 00000000-0000-4000-8000-<x as 12 hex digits>.
func benchID(x int64) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", x) }

// benchDevice is worker w's i-th device; the SQL and the pgbench script
// compute the same id.
func benchDevice(w, i int) string { return benchID(int64(w)<<24 + int64(i)) }

const benchBuyerBase = 0xb00000000

// sqlBenchID is benchID in SQL.
const sqlBenchID = `('00000000-0000-4000-8000-' || lpad(to_hex(%s), 12, '0'))::uuid`

// sqlSeedQueued fills a migrated database the way CreateJob would have:
// @jobs queued jobs of @service (created @created + i µs, deadline
// @deadline) over @buyers buyers, each with a held hold of @price cents and
// its journal row, the buyers' balances and initial amounts conserving the
// holds.
var sqlSeedQueued = []string{
	`INSERT INTO buyers (id, name, balance_cents, captured_cents, initial_cents)
	 SELECT ` + fmt.Sprintf(sqlBenchID, fmt.Sprint(benchBuyerBase)+` + k`) + `, 'bench', 1000, 0, 1000
	 FROM generate_series(0, @buyers::int - 1) k`,
	`INSERT INTO jobs (id, buyer_id, service, params, input_bytes, input_sha256, max_attempts, attempt_count,
	                   status, request_fingerprint, created_at, admission_deadline, updated_at)
	 SELECT gen_random_uuid(), ` + fmt.Sprintf(sqlBenchID, fmt.Sprint(benchBuyerBase)+` + i % @buyers::int`) + `, @service, '{}', 10,
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

// sqlSeedDevices adds $1 workers x $2 devices (benchDevice(w, i)) offering
// $3 with $4 slots.
const sqlSeedDevices = `
INSERT INTO devices (id, name, services, slots_total, status)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(w * 16777216 + i), 12, '0'))::uuid, 'bench', ARRAY[$3::text], $4, 'offline'
FROM generate_series(0, $1::int - 1) w, generate_series(0, $2::int - 1) i`

// sqlSeedUploading leases every queued job, the k-th by created_at on
// device benchDevice(0, k/@slots), and reports uploading, as
// Lease and Progress would have: each attempt's token is "bench-" + its job
// id, its lease expires at @expires, and the journal has both transitions.
var sqlSeedUploading = []string{
	`INSERT INTO job_attempts (id, job_id, attempt_number, device_id, status, lease_epoch, commit_token_hash,
	                           lease_expires_at, created_at)
	 SELECT gen_random_uuid(), id, 1, ('00000000-0000-4000-8000-' || lpad(to_hex(rn / @slots::int), 12, '0'))::uuid,
	        'leased', 1, encode(sha256(convert_to('bench-' || id::text, 'UTF8')), 'hex'), @expires, created_at
	 FROM (SELECT id, created_at, row_number() OVER (ORDER BY created_at, id) - 1 AS rn FROM jobs) j`,
	`INSERT INTO job_events (kind, job_id, attempt_id, from_status, to_status, code, actor, at)
	 SELECT 'attempt', job_id, id, NULL, 'leased', '', 'matcher', created_at FROM job_attempts ORDER BY created_at`,
	`UPDATE jobs SET status = 'active', attempt_count = 1`,
	`INSERT INTO job_events (kind, job_id, attempt_id, from_status, to_status, code, actor, at)
	 SELECT 'job', id, NULL, 'queued', 'active', '', 'matcher', created_at FROM jobs ORDER BY created_at`,
	`UPDATE job_attempts SET status = 'uploading'`,
	`INSERT INTO job_events (kind, job_id, attempt_id, from_status, to_status, code, actor, at)
	 SELECT 'attempt', job_id, id, 'leased', 'uploading', '', 'device', created_at FROM job_attempts ORDER BY created_at`,
}

// benchDB is one fresh database of the shared cluster.
type benchDB struct {
	url  string
	pool *pgxpool.Pool
}

// newBenchDB clones the migrated template (pgprovider starts the cluster
// on first use) and opens a pool with room for conns connections: pgxpool's
// default (max(4, NumCPU)) would itself throttle eight workers.
func newBenchDB(b *testing.B, conns int) *benchDB {
	b.Helper()
	url := pgprovider.MustDatabase(b, templateName, store.Migrate)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = int32(conns)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return &benchDB{url: url, pool: pool}
}

func (d *benchDB) exec(b *testing.B, sql string, args ...any) {
	b.Helper()
	if _, err := d.pool.Exec(context.Background(), sql, args...); err != nil {
		b.Fatalf("seed: %v\n%s", err, sql)
	}
}

// seed fills the database with jobs queued jobs and workers x devices devices.
func (d *benchDB) seed(b *testing.B, jobs, workers, devices int) {
	b.Helper()
	price := int64(0)
	for _, s := range protocol.Services {
		if s.Name == benchService {
			price = s.PriceCents
		}
	}
	args := pgx.NamedArgs{"jobs": jobs, "service": benchService, "created": benchCreated, "deadline": benchDead,
		"buyers": benchBuyers, "price": price}
	for _, q := range sqlSeedQueued {
		d.exec(b, q, args)
	}
	d.exec(b, sqlSeedDevices, workers, devices, benchService, benchSlots)
	d.exec(b, "ANALYZE")
}

// requireInvariants checks SPEC section 4 over what the benchmark left.
func (d *benchDB) requireInvariants(b *testing.B) {
	b.Helper()
	v, err := store.CheckInvariants(context.Background(), d.pool)
	if err != nil {
		b.Fatal(err)
	}
	if len(v) > 0 {
		b.Fatalf("%d invariant violations, first: %v", len(v), v[0])
	}
}

// share is how many of n operations worker w of workers does.
func share(n, workers, w int) int {
	k := n / workers
	if w < n%workers {
		k++
	}
	return k
}

// newBenchService is a Service drawing real random ids and tokens.
func newBenchService(d *benchDB, st artifact.Store) *server.Service {
	ids := protocol.RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader}
	return server.NewService(d.pool, st, ids, server.Config{})
}

// runWorkers runs fn(w, k) for worker w's k-th operation on its own
// goroutine, with the benchmark timer running only while they do, and
// returns the wall time they took.
func runWorkers(b *testing.B, workers int, fn func(w, k int) error) time.Duration {
	b.Helper()
	errs := make([]error, workers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			for k := range share(b.N, workers, w) {
				if err := fn(w, k); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	b.ResetTimer()
	b.StartTimer()
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)
	b.StopTimer()
	for w, err := range errs {
		if err != nil {
			b.Fatalf("worker %d: %v", w, err)
		}
	}
	return elapsed
}

// BenchmarkLease measures Service.Lease with 1, 2 and 8 concurrent workers,
// each leasing on its own devices from one shared queue of jobs (so the
// workers contend exactly where devices do: on the queue, through SKIP
// LOCKED), and compares it with pgbench running the same transaction.
func BenchmarkLease(b *testing.B) {
	pg := &pgbenchRuns{tps: map[int]float64{}}
	for _, workers := range benchWorkers {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.StopTimer()
			tps, pgbenchErr := pg.get(b, workers)
			d := newBenchDB(b, workers+2)
			d.seed(b, b.N, workers, share(b.N, workers, 0)/benchSlots+1)
			svc := newBenchService(d, nil)
			ctx := context.Background()
			elapsed := runWorkers(b, workers, func(w, k int) error {
				r, err := svc.Lease(ctx, benchNow, benchDevice(w, k/benchSlots))
				if err != nil {
					return err
				}
				if r.Code != protocol.CodeLeaseOffer {
					return fmt.Errorf("lease %d: %+v", k, r)
				}
				return nil
			})
			rate := float64(b.N) / elapsed.Seconds()
			b.ReportMetric(rate, "leases/s")
			reportRetries(b, svc)
			if pgbenchErr != nil {
				b.Logf("no pgbench comparison: %v", pgbenchErr)
			} else {
				b.ReportMetric(tps, "pgbench_tps")
				b.ReportMetric(rate/tps, "ratio_vs_pgbench")
			}
			d.requireInvariants(b)
		})
	}
}

// BenchmarkCommit measures the whole Service.Commit (transaction 1,
// verification of the stored MP4, transaction 2) with 1, 2 and 8
// concurrent workers, each committing its own share of attempts that were
// seeded as uploading with their outputs in the artifact store.
func BenchmarkCommit(b *testing.B) {
	content := mp4.Synthetic(mp4.SyntheticParams{Seed: "bench"})
	sum := sha256.Sum256(content)
	claimSHA := hex.EncodeToString(sum[:])
	for _, workers := range benchWorkers {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.StopTimer()
			ctx := context.Background()
			d := newBenchDB(b, workers+2)
			d.seed(b, b.N, 1, b.N/benchSlots+1)
			for _, q := range sqlSeedUploading {
				d.exec(b, q, pgx.NamedArgs{"slots": benchSlots, "expires": benchDead})
			}
			d.exec(b, "ANALYZE")
			commits := d.uploadingCommits(b)
			fs, err := artifact.NewFS(artifactDir(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = fs.Close() })
			putAll(b, fs, commits, content, claimSHA)
			svc := newBenchService(d, fs)
			elapsed := runWorkers(b, workers, func(w, k int) error {
				c := commits[w+k*workers]
				r, err := svc.Commit(ctx, benchNow, c.device, c.Commit)
				if err != nil {
					return err
				}
				if r.Code != protocol.CodeCommitOK {
					return fmt.Errorf("commit %s: %+v", c.AttemptID, r)
				}
				return nil
			})
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "commits/s")
			reportRetries(b, svc)
			d.requireInvariants(b)
		})
	}
}

// benchCommit is one seeded attempt's commit, with the device that holds it.
type benchCommit struct {
	protocol.Commit
	device string
}

// uploadingCommits reads back every seeded attempt as the commit its device
// would send.
func (d *benchDB) uploadingCommits(b *testing.B) []benchCommit {
	b.Helper()
	rows, err := d.pool.Query(context.Background(),
		`SELECT job_id::text, id::text, device_id::text FROM job_attempts ORDER BY created_at`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var out []benchCommit
	for rows.Next() {
		var c benchCommit
		if err := rows.Scan(&c.JobID, &c.AttemptID, &c.device); err != nil {
			b.Fatal(err)
		}
		c.LeaseEpoch, c.CommitToken = 1, "bench-"+c.JobID
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	if len(out) != b.N {
		b.Fatalf("seeded %d uploading attempts, want %d", len(out), b.N)
	}
	return out
}

// putAll stores content at every commit's output key (in parallel: FS.Put
// fsyncs) and fills in the honest claims.
func putAll(b *testing.B, fs *artifact.FS, commits []benchCommit, content []byte, claimSHA string) {
	b.Helper()
	const putters = 8
	errs := make([]error, putters)
	var wg sync.WaitGroup
	for p := range putters {
		wg.Go(func() {
			for i := p; i < len(commits); i += putters {
				c := &commits[i]
				key := protocol.OutputKey(c.JobID, c.AttemptID)
				if _, err := fs.Put(context.Background(), key, bytes.NewReader(content)); err != nil {
					errs[p] = err
					return
				}
				c.Output = protocol.Output{Key: key, Bytes: int64(len(content)), SHA256: claimSHA}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// artifactDir is a fresh directory for the outputs, on tmpfs when there is
// one (the store fsyncs every Put; verification only reads).
func artifactDir(b *testing.B) string {
	b.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "rendermac-bench-"); err == nil {
			b.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return b.TempDir()
}

func reportRetries(b *testing.B, svc *server.Service) {
	var n int64
	for _, v := range svc.Stats().Retries {
		n += v
	}
	b.ReportMetric(float64(n), "retries")
}

// pgbenchRuns runs pgbench once per worker count, on the first run of that
// sub-benchmark, and remembers the result for the later runs.
type pgbenchRuns struct {
	tps  map[int]float64
	errs map[int]error
}

func (p *pgbenchRuns) get(b *testing.B, clients int) (float64, error) {
	if tps, ok := p.tps[clients]; ok {
		return tps, nil
	}
	if err, ok := p.errs[clients]; ok {
		return 0, err
	}
	tps, err := runPgbench(b, clients)
	if err != nil {
		if p.errs == nil {
			p.errs = map[int]error{}
		}
		p.errs[clients] = err
		return 0, err
	}
	p.tps[clients] = tps
	return tps, nil
}

// pgbenchJobs is how many queued jobs pgbench's database starts with: it
// must not run dry within pgbenchSeconds (a client that finds no job
// aborts). When it does, the run is repeated with four times as many.
const pgbenchJobs = 20000

var pgbenchTPS = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)

// runPgbench seeds a fresh database like BenchmarkLease's and runs
// testdata/lease.pgbench on it with clients clients (and threads) for
// pgbenchSeconds, returning pgbench's tps. A missing pgbench binary is an
// error, reported by the caller, not a benchmark failure.
func runPgbench(b *testing.B, clients int) (float64, error) {
	b.Helper()
	bin, err := findPgbench()
	if err != nil {
		return 0, err
	}
	script, err := filepath.Abs(filepath.Join("testdata", "lease.pgbench"))
	if err != nil {
		return 0, err
	}
	for jobs := pgbenchJobs; ; jobs *= 4 {
		tps, dry, err := pgbenchOnce(b, bin, script, clients, jobs)
		if err != nil || !dry {
			return tps, err
		}
		if jobs >= 64*pgbenchJobs {
			return 0, fmt.Errorf("pgbench leased all %d seeded jobs", jobs)
		}
		b.Logf("pgbench -c %d leased all %d jobs; again with more", clients, jobs)
	}
}

// pgbenchOnce is one pgbench run on a fresh database of jobs queued jobs;
// dry reports that it leased them all.
func pgbenchOnce(b *testing.B, bin, script string, clients, jobs int) (tps float64, dry bool, err error) {
	d := newBenchDB(b, 2)
	d.seed(b, jobs, clients, jobs/benchSlots+1)
	cfg, err := pgconn.ParseConfig(d.url)
	if err != nil {
		return 0, false, err
	}
	// The same TCP endpoint the Go side's pool uses; -D n=0 starts each
	// client's lease counter.
	args := []string{"-n", "-f", script, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(clients),
		"-T", strconv.Itoa(pgbenchSeconds), "-D", "slots=" + strconv.Itoa(benchSlots), "-D", "n=0",
		"-h", cfg.Host, "-p", strconv.Itoa(int(cfg.Port)), "-U", cfg.User, cfg.Database}
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	if cfg.Password != "" {
		cmd.Env = append(cmd.Env, "PGPASSWORD="+cfg.Password)
	}
	if cfg.TLSConfig == nil { // sslmode=disable in the URL
		cmd.Env = append(cmd.Env, "PGSSLMODE=disable")
	}
	out, runErr := cmd.CombinedOutput()
	var queued int
	if err := d.pool.QueryRow(context.Background(), `SELECT count(*) FROM jobs WHERE status = 'queued'`).Scan(&queued); err != nil {
		return 0, false, err
	}
	if queued == 0 {
		return 0, true, nil
	}
	if runErr != nil {
		return 0, false, fmt.Errorf("pgbench %v: %w\n%s", args, runErr, out)
	}
	m := pgbenchTPS.FindSubmatch(out)
	if m == nil {
		return 0, false, fmt.Errorf("pgbench printed no tps line:\n%s", out)
	}
	if tps, err = strconv.ParseFloat(string(m[1]), 64); err != nil {
		return 0, false, err
	}
	// The script's rows must be as sound as the service's.
	d.requireInvariants(b)
	b.Logf("pgbench -c %d: %.0f tps, %d of %d jobs left queued", clients, tps, queued, jobs)
	return tps, false, nil
}

// findPgbench looks on PATH, then in the distribution's server directories
// (PostgreSQL 15 first).
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
	return "", fmt.Errorf("pgbench not found on PATH or in /usr/lib/postgresql/*/bin")
}
