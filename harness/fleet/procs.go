package fleet

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rendermac/rendermac/internal/tcpproxy"
)

// proc is one child process of the run, restartable with the same argv.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	log  string // stderr (and stdout) file
	// children records the pid of each start (nil: not recorded).
	children *childLog

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), p.env...)
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.children.add(cmd.Process.Pid, p.name)
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() { _ = cmd.Wait(); _ = f.Close(); close(done) }()
	return nil
}

// signal sends sig to the process; false when it is not running.
func (p *proc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return false
	}
	return p.cmd.Process.Signal(sig) == nil
}

// exited reports whether the process was started and has ended.
func (p *proc) exited() bool {
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

// lastLine is the last non-empty line of a file ("" if none).
func lastLine(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// kill SIGKILLs the process and waits until it is gone.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// stop asks the process to end (SIGTERM), then kills it after grace.
func (p *proc) stop(grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
	}
	p.kill()
}

// gateway is one `rendermac server` process on a fixed address.
type gateway struct {
	proc
	addr string
}

func (g *gateway) url() string { return "https://" + g.addr }

// waitReady polls /readyz until the server answers 200 or d passes.
func (r *run) waitReady(ctx context.Context, base string, d time.Duration) error {
	deadline := time.Now().Add(d)
	c := r.readyClient()
	defer c.CloseIdleConnections()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		resp, err := c.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not ready within %s (last: %v)", base, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// agentProc is one `rendermac agent` process with its own paths (one TCP
// proxy per gateway: its Wi-Fi) and work dir.
type agentProc struct {
	proc
	idx     int
	work    string
	tmpfs   bool
	paths   []*tcpproxy.Proxy
	ballast string
}

// forwarded counts the connections its paths carried to a gateway.
func (a *agentProc) forwarded() int64 {
	var n int64
	for _, p := range a.paths {
		n += p.Forwarded()
	}
	return n
}

// mountTmpfs mounts a tmpfs of size bytes at dir; false where the system
// does not let us (not root, no mount).
func mountTmpfs(dir string, size int64) bool {
	return exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10), "tmpfs", dir).Run() == nil
}

func unmount(dir string) { _ = exec.Command("umount", "-l", dir).Run() }

// fillDisk writes a ballast file that leaves about leave bytes free on
// dir's file system; it returns the ballast's size.
func fillDisk(dir string, leave int64) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	free := int64(st.Bavail) * int64(st.Bsize) //nolint:unconvert // field types differ by OS
	size := free - leave
	if size <= 0 {
		return 0, nil
	}
	f, err := os.Create(filepath.Join(dir, "ballast"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for n < size {
		k := min(int64(len(buf)), size-n)
		w, err := f.Write(buf[:k])
		n += int64(w)
		if err != nil {
			break // the disk filled first: that is the point
		}
	}
	return n, nil
}
