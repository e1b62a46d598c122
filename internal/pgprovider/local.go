package pgprovider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/internal/localserver"
)

// runAs is the unprivileged account initdb/postgres run as when we are
// root; both refuse to run as root.
type runAs struct{ uid, gid int }

// cluster is an ephemeral PostgreSQL cluster owned by this process.
type cluster struct {
	binDir       string
	root         string // temp dir; everything below is removed by close
	dataDir      string
	logPath      string
	sockDir      string // "" when the socket path would be too long
	port         int
	fsync        bool
	settings     []string
	as           *runAs
	startTimeout time.Duration

	mu     sync.Mutex // serialises start/stop/crash/close
	cmd    *exec.Cmd  // nil while stopped
	exited chan struct{}
}

func newCluster(ctx context.Context, opts Options) (*cluster, error) {
	bin, err := findBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	as, err := lookupRunAs()
	if err != nil {
		return nil, err
	}
	base := opts.BaseDir
	if base == "" && os.Getenv("TMPDIR") == "" && !opts.Fsync {
		base = fastBaseDir()
	}
	if base == "" {
		base = os.TempDir()
	}
	if as != nil && !traversableByOthers(base) {
		base = "/tmp" // the postgres user must be able to reach the data dir
	}
	cleanStale(base)
	root, err := os.MkdirTemp(base, fmt.Sprintf("pgprovider-%d-", os.Getpid()))
	if err != nil {
		return nil, err
	}
	c := &cluster{
		binDir: bin, root: root, as: as, fsync: opts.Fsync, settings: opts.Settings,
		dataDir:      filepath.Join(root, "data"),
		logPath:      filepath.Join(root, "postgres.log"),
		startTimeout: opts.StartTimeout,
	}
	if c.startTimeout <= 0 {
		c.startTimeout = 60 * time.Second
	}
	// sun_path is 104 bytes on darwin, 108 on linux; stay below both.
	if len(c.dataDir)+len("/.s.PGSQL.65535.lock") < 100 {
		c.sockDir = c.dataDir
	}
	if err := c.initdb(ctx); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	if err := c.firstStart(ctx); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	return c, nil
}

func (c *cluster) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// command builds a server-side command; ctx kills it when done, so the
// postmaster gets context.Background(): it must outlive the call that
// started it.
func (c *cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	cmd.Dir = c.root // the cwd may be unreadable for the postgres user
	// C locale: deterministic behaviour and English messages, which
	// startLocked inspects.
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	cmd.SysProcAttr = sysProcAttr(c.as)
	return cmd
}

func (c *cluster) initdb(ctx context.Context) error {
	if c.as != nil {
		if err := os.Chown(c.root, c.as.uid, c.as.gid); err != nil {
			return fmt.Errorf("chown %s to postgres: %w", c.root, err)
		}
	}
	args := []string{"-D", c.dataDir, "--auth=trust", "-U", "postgres",
		"--encoding=UTF8", "--locale=C"}
	if !c.fsync {
		args = append(args, "--no-sync")
	}
	if out, err := c.command(ctx, "initdb", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("initdb (%s) failed: %w\n%s", c.binDir, err, tail(string(out), 20))
	}
	return nil
}

// firstStart picks a free port and starts; if another process grabbed the
// port between probe and bind, it tries a new one.
func (c *cluster) firstStart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	for range 5 {
		if c.port, err = localserver.FreePort(); err != nil {
			return err
		}
		if err = c.startLocked(ctx, false); err == nil || !strings.Contains(err.Error(), "could not bind") {
			return err
		}
	}
	return err
}

func (c *cluster) start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.root == "" {
		return errors.New("pgprovider: cluster is closed")
	}
	if c.cmd != nil {
		return nil
	}
	// The port must stay the same, so a bind failure is waited out.
	return c.startLocked(ctx, true)
}

// Retryable start failures: right after a Crash the old shared memory
// segment or lock file may still be held by dying backends.
var transientStart = []string{"shared memory block", "lock file"}

func (c *cluster) startLocked(ctx context.Context, retryBind bool) error {
	deadline := time.Now().Add(c.startTimeout)
	for {
		off := fileSize(c.logPath)
		err := c.spawnAndWait(ctx, deadline)
		if err == nil {
			return nil
		}
		log := readFrom(c.logPath, off)
		retry := retryBind && strings.Contains(log, "could not bind")
		for _, s := range transientStart {
			retry = retry || strings.Contains(log, s)
		}
		if !retry || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("pgprovider: postgres did not start: %w\n--- %s (tail) ---\n%s", err, c.logPath, tail(log, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var errExited = errors.New("postgres exited during startup")

func (c *cluster) spawnAndWait(ctx context.Context, deadline time.Time) error {
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fsync := "off"
	if c.fsync {
		fsync = "on"
	}
	args := []string{"-D", c.dataDir, "-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + c.sockDir,
		"-c", "fsync=" + fsync,
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB",
		"-c", "huge_pages=off"}
	for _, s := range c.settings {
		args = append(args, "-c", s)
	}
	cmd := c.command(context.Background(), "postgres", args...)
	// An *os.File is handed to the child as-is: no copying goroutine, and
	// the log survives our own crash.
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	if err := c.waitReady(ctx, exited, deadline); err != nil {
		killTree(cmd.Process.Pid)
		<-exited
		return err
	}
	c.cmd, c.exited = cmd, exited
	return nil
}

func (c *cluster) waitReady(ctx context.Context, exited <-chan struct{}, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(actx, c.url("postgres"))
		acancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-exited:
			return errExited
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

func (c *cluster) stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked(ctx)
}

func (c *cluster) stopLocked(ctx context.Context) error {
	if c.cmd == nil {
		return nil
	}
	_ = c.cmd.Process.Signal(os.Interrupt) // SIGINT = fast shutdown
	select {
	case <-c.exited:
		c.cmd = nil
		return nil
	case <-ctx.Done():
		c.crashLocked()
		return fmt.Errorf("pgprovider: fast shutdown did not finish (%w); postgres was killed", ctx.Err())
	}
}

func (c *cluster) crash() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashLocked()
	return nil
}

func (c *cluster) crashLocked() {
	if c.cmd == nil {
		return
	}
	killTree(c.cmd.Process.Pid)
	<-c.exited
	c.cmd = nil
}

func (c *cluster) close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.stopLocked(ctx)
	if rerr := os.RemoveAll(c.root); rerr != nil && err == nil {
		err = rerr
	}
	c.root = ""
	return err
}
