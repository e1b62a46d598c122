package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/rendermac/rendermac/internal/syncbuf"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// RunClientOnly runs the stack phases (peak, latency, progress; no idle
// sessions, no pgbench, no campaigns) as the load generator alone, against
// a control plane already serving at baseURL on the database at dbURL. The
// database is used for the setup (buyers with API keys, devices with known
// tokens) and the invariant check after the load; every figure comes from
// the wire and the server's /metrics. Start the server first, e.g.
//
//	rendermac admin gen-key /tmp/k && rendermac server --db URL --artifacts DIR --signing-key-file /tmp/k --log-level error
//	rendermac bench --client-only --url http://127.0.0.1:8080 --db URL
func RunClientOnly(ctx context.Context, cfg Config, baseURL, dbURL string) (*Result, error) {
	cfg.defaults()
	cfg.skipMemory = true
	cfg.serverElsewhere = cfg.serverPID == 0
	began := time.Now()
	res := &Result{Started: began.UTC(), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), Agents: cfg.Agents,
		Slots: cfg.Slots, Jobs: cfg.Jobs, PhaseS: map[string]float64{}}
	res.Pgbench.Error = "not run by --client-only"
	res.Model.Error, res.Diff.Error = "not run by --client-only", "not run by --client-only"
	phase := func(name string, t0 time.Time) {
		res.PhaseS[name] = time.Since(t0).Seconds()
		fmt.Fprintf(cfg.Log, "bench: %s done in %s\n", name, time.Since(t0).Round(time.Millisecond))
	}
	pool, err := store.OpenPool(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	ids := protocol.RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader}
	// For CreateBuyer and CreateDevice only: the server under load is the
	// other process.
	admin := fencing.NewService(pool, nil, ids, fencing.Config{})
	d := newDriver(cfg, strings.TrimRight(baseURL, "/"), pool, admin)
	err = d.load(ctx, res, phase, time.Now())
	res.WallS = time.Since(began).Seconds()
	return res, err
}

// runSplit starts `rendermac server` on dbURL as a subprocess and runs
// RunClientOnly against it.
func runSplit(ctx context.Context, cfg Config, dbURL string) (*SplitResult, error) {
	exe := cfg.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find the rendermac binary for the server process: %w", err)
		}
	}
	dir, err := artifactDir()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	key := filepath.Join(dir, "signing.key")
	if out, err := exec.CommandContext(ctx, exe, "admin", "gen-key", key).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s admin gen-key: %w: %s", exe, err, out)
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	srv := exec.Command(exe, "server", "--db", dbURL, "--listen", addr, "--artifacts", filepath.Join(dir, "artifacts"),
		"--signing-key-file", key, "--log-level", "error")
	var logs syncbuf.Buffer
	srv.Stdout, srv.Stderr = &logs, &logs
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start %s server: %w", exe, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	stop := func() error {
		_ = srv.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			return err
		case <-time.After(40 * time.Second):
			_ = srv.Process.Kill()
			<-exited
			return errors.New("server process did not stop within 40s of SIGINT; killed")
		}
	}
	base := "http://" + addr
	fmt.Fprintf(cfg.Log, "bench: two-process: %s server --listen %s (pid %d)\n", exe, addr, srv.Process.Pid)
	if err := waitReady(ctx, base, exited); err != nil {
		_ = stop()
		return nil, fmt.Errorf("%w; server output: %s", err, tail(&logs))
	}
	cfg.serverPID = srv.Process.Pid
	r, err := RunClientOnly(ctx, cfg, base, dbURL)
	if serr := stop(); err == nil && serr != nil {
		err = fmt.Errorf("server process: %w; output: %s", serr, tail(&logs))
	}
	if r == nil {
		return nil, err
	}
	return &SplitResult{Peak: r.Peak, Latency: r.Latency, Progress: r.Progress, DB: r.DB, Ops: r.Ops,
		InvariantViolations: r.InvariantViolations,
		How: fmt.Sprintf("`rendermac server` in its own process (pid %d) on a fresh database of the same cluster; "+
			"this process only generates the load", srv.Process.Pid)}, err
}

// freeLoopbackAddr returns a loopback address no one listens on now.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitReady polls base/readyz until it answers 200, the process exits, or
// 60 s pass.
func waitReady(ctx context.Context, base string, exited <-chan error) error {
	deadline := time.Now().Add(60 * time.Second)
	c := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("server process exited before it was ready: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if resp, err := c.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("server process not ready within 60s")
}

// tail is the end of a subprocess's output, for an error message.
func tail(b *syncbuf.Buffer) string {
	s := b.String()
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}
