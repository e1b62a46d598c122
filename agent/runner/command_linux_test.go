//go:build linux

package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/clock"
)

// groupScript starts a child that outlives a plain kill of the script (a
// sleep in the background), records the script's pid (its process group id)
// and reports progress, then waits. trapTerm makes the script ignore SIGTERM,
// so only the SIGKILL after the grace period stops it.
func groupScript(pidFile string, trapTerm bool) string {
	s := ""
	if trapTerm {
		s = `trap '' TERM; `
	}
	return s + `sleep 1000 & echo $$ > "` + pidFile + `.tmp" && mv "` + pidFile + `.tmp" "` + pidFile + `"; echo "PROGRESS 0.1"; wait`
}

// runAsync runs c in the background; it returns the channel of its progress
// reports and the one of Run's result.
func runAsync(ctx context.Context, c *Command, params map[string]string, out string) (<-chan float64, <-chan error) {
	progressed := make(chan float64, 16)
	report := func(f float64) {
		select {
		case progressed <- f:
		default:
		}
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, Spec{Params: params, Progress: report}, "", out) }()
	return progressed, done
}

// awaitProgress waits for the run's first progress report: the program runs.
func awaitProgress(t *testing.T, progressed <-chan float64, done <-chan error, limit time.Duration) {
	t.Helper()
	select {
	case <-progressed:
	case err := <-done:
		t.Fatalf("the program ended before its first progress report: %v", err)
	case <-time.After(limit):
		t.Fatalf("the program reported no progress within %s", limit)
	}
}

// startGroup runs groupScript through a command runner set up by configure,
// waits until the script and its child run, and returns the group id and
// the channel of Run's result.
func startGroup(t *testing.T, ctx context.Context, trapTerm bool, configure func(*Command)) (int, <-chan error) {
	t.Helper()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	c := runScript(t, groupScript(pidFile, trapTerm), CommandConfig{Argv: []string{"{output}"}, TimeoutS: 30})
	configure(c)
	progressed, done := runAsync(ctx, c, nil, filepath.Join(dir, "o.mp4"))
	awaitProgress(t, progressed, done, 60*time.Second)
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pgid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	require.Len(t, groupMembers(pgid), 2, "the script and its sleep run in the script's own group")
	return pgid, done
}

// The time limit kills the whole group: the script ignores SIGTERM, so the
// SIGKILL after the grace period is what stops it and its child. The clock
// is a stub, moved only once the program runs, so the test does not wait.
func TestCommandTimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	stub := clock.NewStub(time.Unix(0, 0))
	pgid, done := startGroup(t, t.Context(), true, func(c *Command) { c.Clock, c.KillGrace = stub, 2*time.Second })
	require.Eventually(t, func() bool { return stub.Waiters() == 1 }, 10*time.Second, time.Millisecond)
	stub.Advance(30 * time.Second)
	// SIGTERM went out and is ignored; the grace timer is the next waiter.
	require.Eventually(t, func() bool { return stub.Waiters() == 1 }, 10*time.Second, time.Millisecond)
	require.Len(t, groupMembers(pgid), 2, "SIGTERM is trapped: the group lives until the grace period ends")
	stub.Advance(2 * time.Second)
	err := <-done
	var ce *CommandError
	require.ErrorAs(t, err, &ce)
	require.True(t, ce.Timeout())
	require.Contains(t, err.Error(), "time limit of 30s reached, process group killed")
	require.Empty(t, groupMembers(pgid), "no process of the group outlives the time limit")
}

// A cancel (buyer cancel, lost lease, shutdown) stops the group with SIGTERM
// and Run returns the cancel's cause.
func TestCommandCancelKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	pgid, done := startGroup(t, ctx, false, func(*Command) {})
	cause := errors.New("cancelled by the buyer")
	cancel(cause)
	err := <-done
	require.ErrorIs(t, err, cause)
	require.Contains(t, err.Error(), "process group killed")
	require.Empty(t, groupMembers(pgid), "no process of the group outlives a cancel")
}

// A program that exits and leaves a child behind (holding its stdout) does
// not leave it running: the group is killed after the program exits, and
// Run does not wait for the child's pipe.
func TestCommandExitKillsLeftoverChildren(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	script := `sleep 1000 & echo $! > "` + pidFile + `"; echo frame > "$1"`
	c := runScript(t, script, CommandConfig{Argv: []string{"{output}"}})
	start := time.Now()
	require.NoError(t, c.Run(t.Context(), Spec{}, "", filepath.Join(dir, "o.mp4")))
	require.Less(t, time.Since(start), killGrace, "Run waited for the leftover child's pipe")
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	require.Empty(t, liveProcesses(func(pid int, _ []string, _ []byte) bool { return pid == child }),
		"the child the program left behind was killed with its group")
}
