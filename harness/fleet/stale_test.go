package fleet

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// deadPid returns the pid of a process that has exited.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func staleDir(t *testing.T, tmp string, pid int) string {
	t.Helper()
	dir, err := os.MkdirTemp(tmp, "rendermac-fleet-")
	if err != nil {
		t.Fatal(err)
	}
	if pid != 0 {
		if err := os.WriteFile(filepath.Join(dir, harnessFile), fmt.Appendf(nil, "%d", pid), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A run killed before its cleanup leaves its directory (and, as root, its
// tmpfs mounts); the next run removes both, and leaves a live run's
// directory and a kept one alone.
func TestCleanStaleRemovesOnlyDeadRunsAndTheirMounts(t *testing.T) {
	tmp := t.TempDir()
	dead := staleDir(t, tmp, deadPid(t))
	live := staleDir(t, tmp, os.Getpid())
	kept := staleDir(t, tmp, 0)
	work := filepath.Join(dead, "agent-0-work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	mounted := mountTmpfs(work, 1<<20)
	t.Cleanup(func() { unmount(work) })
	var log bytes.Buffer
	cleanStale(tmp, "rendermac", &log)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead run's dir is still there (%v); log: %s", err, log.String())
	}
	for _, d := range []string{live, kept} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
	if mounted && slices.Contains(mountPoints(), work) {
		t.Errorf("the dead run's tmpfs %s is still mounted", work)
	}
	t.Logf("tmpfs mounted: %v; %s", mounted, log.String())
}

// The portable fallback kills a listed child only while it still runs the
// named binary: a pid reused by another program is spared.
func TestKillChildrenSparesOtherPrograms(t *testing.T) {
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	t.Cleanup(func() { _ = child.Process.Kill() })
	list := filepath.Join(t.TempDir(), childrenFile)
	if err := os.WriteFile(list, fmt.Appendf(nil, "%d agent-0\n%d gateway-0\n", child.Process.Pid, deadPid(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := killChildren(list, "rendermac"); n != 0 {
		t.Fatalf("killed %d processes that do not run rendermac", n)
	}
	if n := killChildren(list, "sleep"); n != 1 {
		t.Fatalf("killed %d, want the one child still running", n)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the child was not killed")
	}
}
