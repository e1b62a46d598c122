package fencing_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/internal/benchdb"
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/fencing"
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
	// uses device benchdb.Device(w, k/benchSlots), so no device is
	// ever full and the live-attempt count Lease makes stays a device's
	// real load.
	benchSlots = benchdb.Slots
	// benchBuyers spread the jobs, so that hold settlement (which updates
	// the buyer row) does not serialise every commit on one row.
	benchBuyers = benchdb.SeedBuyers
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
	benchCreated = benchdb.SeedCreated
	benchDead    = benchdb.SeedDeadline
)

// sqlSeedUploading leases every queued job, the k-th by created_at on
// device benchdb.Device(0, k/@slots), and reports uploading, as
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
	ctx := context.Background()
	q := benchdb.Queued{Jobs: jobs, Buyers: benchBuyers, Service: benchService, PriceCents: benchPrice(),
		Created: benchCreated, Deadline: benchDead}
	seedOK(b, benchdb.SeedQueued(ctx, d.pool, q))
	seedOK(b, benchdb.SeedDevices(ctx, d.pool, workers, devices, benchService, benchSlots))
	d.exec(b, "ANALYZE")
}

// benchPrice is benchService's price in the catalogue.
func benchPrice() int64 {
	s, _ := protocol.LookupService(benchService)
	return s.PriceCents
}

// seedOK fails the benchmark on a seeding error, as exec does.
func seedOK(b *testing.B, err error) {
	b.Helper()
	if err == nil {
		return
	}
	var se *benchdb.SeedError
	if errors.As(err, &se) {
		b.Fatalf("seed: %v\n%s", se.Err, se.SQL)
	}
	b.Fatalf("seed: %v", err)
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
func newBenchService(d *benchDB, st artifact.Store) *fencing.Service {
	ids := protocol.RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader}
	return fencing.NewService(d.pool, st, ids, fencing.Config{})
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
				r, err := svc.Lease(ctx, benchNow, benchdb.Device(w, k/benchSlots))
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

// BenchmarkCreateJob measures Service.CreateJob (POST /v1/jobs without the
// HTTP) with 1, 2 and 8 concurrent workers, worker w creating for seeded
// buyer w, so that the workers contend where buyers do: on the buyer row
// each create locks for its whole transaction (8 workers share no buyer).
func BenchmarkCreateJob(b *testing.B) {
	for _, workers := range benchWorkers {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.StopTimer()
			ctx := context.Background()
			d := newBenchDB(b, workers+2)
			d.seed(b, 0, workers, 1)
			// Funds for every create, conserved: initial = balance + held + captured.
			d.exec(b, `UPDATE buyers SET balance_cents = balance_cents + @extra, initial_cents = initial_cents + @extra`,
				pgx.NamedArgs{"extra": int64(b.N) * benchPrice()})
			svc := newBenchService(d, nil)
			elapsed := runWorkers(b, workers, func(w, k int) error {
				r, err := svc.CreateJob(ctx, benchNow, protocol.CreateJobRequest{BuyerID: benchdb.Buyer(w),
					Service: benchService, Params: map[string]string{"seed": strconv.Itoa(k)},
					Input:       protocol.InputRef{URL: "https://in/x", Bytes: 10, SHA256: strings.Repeat("a1", 32)},
					MaxAttempts: 3, AdmissionWindow: time.Hour})
				if err != nil {
					return err
				}
				if r.Code != protocol.CodeCreated {
					return fmt.Errorf("create %d: %+v", k, r)
				}
				return nil
			})
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "creates/s")
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

func reportRetries(b *testing.B, svc *fencing.Service) {
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

// runPgbench seeds a fresh database like BenchmarkLease's and runs
// testdata/lease.pgbench on it with clients clients (and threads) for
// pgbenchSeconds, returning pgbench's tps. A missing pgbench binary is an
// error, reported by the caller, not a benchmark failure. A run that
// leases every seeded job (benchdb.PgbenchJobs at first) is repeated with
// four times as many.
func runPgbench(b *testing.B, clients int) (float64, error) {
	b.Helper()
	bin, err := benchdb.FindPgbench()
	if err != nil {
		return 0, err
	}
	script, err := filepath.Abs(filepath.Join("testdata", "lease.pgbench"))
	if err != nil {
		return 0, err
	}
	for jobs := benchdb.PgbenchJobs; ; jobs *= 4 {
		tps, dry, err := pgbenchOnce(b, bin, script, clients, jobs)
		if err != nil || !dry {
			return tps, err
		}
		if jobs >= 64*benchdb.PgbenchJobs {
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
	run, err := benchdb.RunPgbench(context.Background(), d.pool, benchdb.Pgbench{
		Bin: bin, Script: script, URL: d.url, Clients: clients, Seconds: pgbenchSeconds, Slots: benchSlots})
	if pe := (*benchdb.PgbenchError)(nil); errors.As(err, &pe) {
		return 0, false, fmt.Errorf("pgbench %v: %w\n%s", pe.Args, pe.Err, pe.Output)
	}
	if err != nil {
		return 0, false, err
	}
	if run.Queued == 0 {
		return 0, true, nil
	}
	// The script's rows must be as sound as the service's.
	d.requireInvariants(b)
	b.Logf("pgbench -c %d: %.0f tps, %d of %d jobs left queued", clients, run.TPS, run.Queued, jobs)
	return run.TPS, false, nil
}
