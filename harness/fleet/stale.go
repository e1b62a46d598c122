package fleet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// A run's directory holds harnessFile (the harness's pid) while the run
// lives, and childrenFile (one "pid name" line per child started). A run
// that ends removes harnessFile; one killed outright (SIGKILL, a power
// cut) leaves it, and the next run's cleanStale finds the directory by it.
const (
	runDirPattern = "rendermac-fleet-*"
	harnessFile   = "harness.pid"
	childrenFile  = "children.pids"
)

// childLog appends each child's pid to the run's childrenFile.
type childLog struct {
	mu   sync.Mutex
	path string
}

func (c *childLog) add(pid int, name string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := os.OpenFile(c.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%d %s\n", pid, name)
	_ = f.Close()
}

// markLive writes the harness's pid into dir and returns the children's log.
func markLive(dir string) (*childLog, error) {
	if err := os.WriteFile(filepath.Join(dir, harnessFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return nil, err
	}
	return &childLog{path: filepath.Join(dir, childrenFile)}, nil
}

// cleanStale finds the directories of fleet runs whose harness is gone
// (killed before its cleanup ran) under tmp, and for each: unmounts the
// tmpfs work dirs still mounted below it, kills its children that are
// still running the rendermac binary bin (off Linux; on Linux the kernel
// killed them with the harness), and removes it. A directory whose harness
// lives is another run's and is left alone. It reports what it did to log.
func cleanStale(tmp, bin string, log io.Writer) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, runDirPattern))
	mounts := mountPoints()
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, harnessFile))
		if err != nil {
			continue // a finished run kept with --keep, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || pid <= 0 || alive(pid) {
			continue
		}
		killed := 0
		if !childrenDieWithUs {
			killed = killChildren(filepath.Join(dir, childrenFile), filepath.Base(bin))
		}
		unmounted := 0
		for _, m := range mounts {
			if strings.HasPrefix(m, dir+string(filepath.Separator)) {
				unmount(m)
				unmounted++
			}
		}
		err = os.RemoveAll(dir)
		fmt.Fprintf(log, "fleet: removed %s, left by a run killed before its cleanup (harness pid %d): %d tmpfs unmounted, %d children killed, err %v\n",
			dir, pid, unmounted, killed, err)
	}
}

// alive reports whether a process with this pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// killChildren SIGKILLs the children listed in path that still run a binary
// named name (so a pid reused by another program is spared).
func killChildren(path, name string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pid, err := strconv.Atoi(strings.Fields(sc.Text() + " x")[0])
		if err != nil || pid <= 0 || !alive(pid) {
			continue
		}
		out, err := exec.Command("ps", "-o", "comm=", "-p", strconv.Itoa(pid)).Output()
		if err != nil || filepath.Base(strings.TrimSpace(string(out))) != name {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// mountPoints lists the mount points the system reports (/proc/self/mounts
// on Linux; elsewhere none, since only Linux runs get tmpfs work dirs).
func mountPoints() []string {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 {
			// Octal escapes (\040 for a space) never occur in our paths.
			out = append(out, fields[1])
		}
	}
	return out
}
