package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
)

func TestPowerCommand(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"caffeinate", "-i", "-w", "4242"}, PowerCommand("darwin", 4242))
	require.Nil(t, PowerCommand("linux", 4242))
	require.Nil(t, PowerCommand("windows", 4242))
}

// gateRunner blocks in Run until its gate closes.
type gateRunner struct {
	started chan struct{}
	gate    chan struct{}
}

func (g gateRunner) Run(context.Context, runner.Spec, string, string) error {
	g.started <- struct{}{}
	<-g.gate
	return nil
}

// Overlapping attempts share one assertion: started by the first runner,
// stopped when the last returns, started again by the next.
func TestPowerAssertionHeldWhileAnyRunnerRuns(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var events []string
	start := func(argv []string) (func(), error) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, "start "+argv[0]+" "+argv[3])
		return func() { mu.Lock(); events = append(events, "stop"); mu.Unlock() }, nil
	}
	p := NewPowerAssertion(PowerCommand("darwin", 7), start, nil)
	g := gateRunner{started: make(chan struct{}), gate: make(chan struct{})}
	rs := KeepAwake(map[string]runner.Runner{"a": g, "b": g}, p)
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		wg.Go(func() { require.NoError(t, rs[name].Run(context.Background(), runner.Spec{}, "", "")) })
	}
	<-g.started
	<-g.started
	mu.Lock()
	require.Equal(t, []string{"start caffeinate 7"}, events, "one assertion for two attempts")
	mu.Unlock()
	close(g.gate)
	wg.Wait()
	require.Equal(t, []string{"start caffeinate 7", "stop"}, events)

	release := p.Hold()
	release()
	release() // idempotent
	require.Equal(t, []string{"start caffeinate 7", "stop", "start caffeinate 7", "stop"}, events)

	// No command (not macOS): nothing is started.
	none := NewPowerAssertion(PowerCommand("linux", 7), func([]string) (func(), error) {
		t.Fatal("started a power command off macOS")
		return nil, nil
	}, nil)
	none.Hold()()

	// A command that cannot start does not stop the attempt.
	broken := NewPowerAssertion([]string{"x"}, func([]string) (func(), error) { return nil, errors.New("no caffeinate") }, nil)
	broken.Hold()()
}

// ExecProcess runs the program until stop, which kills and reaps it.
func TestExecProcessStartsAndStops(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	stop, err := ExecProcess([]string{"sh", "-c", "echo $$ > " + pidFile + "; exec sleep 60"})
	require.NoError(t, err)
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 5*time.Second, 20*time.Millisecond)
	require.NoError(t, syscall.Kill(pid, 0), "running")
	stop()
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "killed and reaped")
}
