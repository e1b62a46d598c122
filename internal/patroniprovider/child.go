package patroniprovider

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rendermac/rendermac/internal/pgprovider"
)

// child is one process of the cluster (etcd or a node's Patroni), its
// output appended to log.
type child struct {
	name, path, log, dir string
	args, env            []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// start runs the process with attr (nil: the server account's, as
// pgprovider.ServerProcAttr gives).
func (p *child) start(attr *syscall.SysProcAttr) error {
	if attr == nil {
		var err error
		if attr, _, _, err = pgprovider.ServerProcAttr(); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Dir = p.dir
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = f.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

// exited reports whether the process was started and has ended.
func (p *child) exited() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// kill SIGKILLs the process and waits until it has been reaped.
func (p *child) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// baseDir is /dev/shm when it is a roomy tmpfs (the nodes clone and
// rewind faster there), else the temp dir.
func baseDir() string {
	const tmpfsMagic = 0x01021994
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err == nil && int64(st.Type) == tmpfsMagic &&
		st.Bavail*uint64(st.Bsize) >= 2<<30 { //nolint:unconvert // field types differ by OS
		return "/dev/shm"
	}
	return os.TempDir()
}

// cleanStale kills the postmasters of, and removes, the cluster dirs of
// processes that died before Close ran (Patroni and etcd die with their
// parent; a postmaster Patroni started does not).
func cleanStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, dirPrefix+"*-*"))
	for _, d := range dirs {
		rest := strings.TrimPrefix(filepath.Base(d), dirPrefix)
		pid, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, '-'), 0)])
		if err != nil || pid == os.Getpid() || pgprovider.ProcessAlive(pid) {
			continue
		}
		datas, _ := filepath.Glob(filepath.Join(d, "pg*", "data"))
		for _, data := range datas {
			if pm := postmasterPID(data); pm > 0 && pgprovider.ProcessAlive(pm) {
				pgprovider.KillTree(pm)
			}
		}
		_ = os.RemoveAll(d)
	}
}
