package benchdb

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

	"github.com/jackc/pgx/v5/pgconn"
)

var (
	pgbenchTPS = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)
	pgbenchTx  = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
)

// Pgbench is one run of the lease script with Clients clients (and
// threads) for Seconds seconds on the seeded database at URL.
type Pgbench struct {
	Bin, Script, URL string
	Clients, Seconds int
	Slots            int // the script's -D slots
	// Args are more pgbench arguments, e.g. -M prepared.
	Args []string
	// NoQueue is a script that reads no jobs (SELECT 1): the run is not
	// void when nothing is queued.
	NoQueue bool
}

// PgbenchError is a pgbench run that failed with queued jobs left.
type PgbenchError struct {
	Args   []string // pgbench's arguments
	Err    error
	Output []byte
}

func (e *PgbenchError) Error() string { return fmt.Sprintf("pgbench: %v\n%s", e.Err, e.Output) }
func (e *PgbenchError) Unwrap() error { return e.Err }

// PgbenchRun is what one pgbench run measured.
type PgbenchRun struct {
	TPS          float64
	Transactions int64 // "number of transactions actually processed"
	// CPU is pgbench's own user + system time (its clients' side; the
	// backends' is Postgres's).
	CPU time.Duration
	// Queued is how many jobs were left queued after it: 0 means the run
	// went dry and its figures are void.
	Queued int
}

// RunPgbench runs p on its database (over the same TCP endpoint as db's,
// with -D n=0 starting each client's lease counter), then counts the jobs
// still queued through db. Queued == 0 means the run went dry and its
// figures are void (no error). A failed run is a *PgbenchError. Checking
// the rows is the caller's.
func RunPgbench(ctx context.Context, db DB, p Pgbench) (PgbenchRun, error) {
	var run PgbenchRun
	cc, err := pgconn.ParseConfig(p.URL)
	if err != nil {
		return run, err
	}
	args := []string{"-n", "-f", p.Script, "-c", strconv.Itoa(p.Clients), "-j", strconv.Itoa(p.Clients),
		"-T", strconv.Itoa(p.Seconds), "-D", "slots=" + strconv.Itoa(p.Slots), "-D", "n=0",
		"-h", cc.Host, "-p", strconv.Itoa(int(cc.Port)), "-U", cc.User}
	args = append(append(args, p.Args...), cc.Database)
	cmd := exec.CommandContext(ctx, p.Bin, args...)
	cmd.Env = os.Environ()
	if cc.Password != "" {
		cmd.Env = append(cmd.Env, "PGPASSWORD="+cc.Password)
	}
	if cc.TLSConfig == nil { // sslmode=disable in the URL
		cmd.Env = append(cmd.Env, "PGSSLMODE=disable")
	}
	out, runErr := cmd.CombinedOutput()
	if ps := cmd.ProcessState; ps != nil {
		run.CPU = ps.UserTime() + ps.SystemTime()
	}
	if err := db.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'queued'`).Scan(&run.Queued); err != nil {
		return run, err
	}
	if run.Queued == 0 && !p.NoQueue {
		return run, nil
	}
	if runErr != nil {
		return run, &PgbenchError{Args: args, Err: runErr, Output: out}
	}
	m, n := pgbenchTPS.FindSubmatch(out), pgbenchTx.FindSubmatch(out)
	if m == nil || n == nil {
		return run, fmt.Errorf("pgbench printed no tps or transaction count line:\n%s", out)
	}
	if run.TPS, err = strconv.ParseFloat(string(m[1]), 64); err != nil {
		return run, err
	}
	if run.Transactions, err = strconv.ParseInt(string(n[1]), 10, 64); err != nil {
		return run, err
	}
	return run, nil
}

// FindScript returns the given path (absolute), else
// server/fencing/testdata/lease.pgbench looked for from the working directory
// upwards.
func FindScript(given string) (string, error) { return FindTestdata(given, "lease.pgbench") }

// FindTestdata returns the given path (absolute), else server/fencing/testdata/name
// looked for from the working directory upwards.
func FindTestdata(given, name string) (string, error) {
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
		p := filepath.Join(dir, "server", "fencing", "testdata", name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("server/fencing/testdata/%s not found from the working directory up (run from the module, or pass its path)", name)
		}
		dir = parent
	}
}

// FindPgbench looks on PATH, then in the distribution's server directories
// (PostgreSQL 15 first).
func FindPgbench() (string, error) {
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
