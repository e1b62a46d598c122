package e2e

import (
	"context"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent"
	"github.com/rendermac/rendermac/agent/runner"
)

// A crash is only honest in another process: SIGKILL gives the agent no
// chance to send fail provider_offline, to close its WebSocket or to run a
// deferred function, and the kernel closes its sockets as it would for a
// Mac that lost power mid-job. So TestMain re-executes this test binary as
// a bare agent process when envChildAgent is set: the same agent.New +
// Run as `rendermac agent --token-file`, without building cmd/rendermac.
const (
	envChildAgent = "RENDERMAC_E2E_CHILD_AGENT"
	envTokenFile  = "RENDERMAC_E2E_TOKEN_FILE"
	envWorkDir    = "RENDERMAC_E2E_WORK_DIR"
	// envDrainTimeout is the child's drain bound (Go duration; default
	// agent.DefaultDrainTimeout).
	envDrainTimeout = "RENDERMAC_E2E_DRAIN_TIMEOUT"
	// envSlots is the child's slot count (default 1).
	envSlots = "RENDERMAC_E2E_SLOTS"
)

// runChildAgent is the child process: it loads the device credentials from
// the token file and runs the agent until it is killed or signalled, taking
// SIGTERM, SIGINT and SIGQUIT as `rendermac agent` does (RunSignalled).
func runChildAgent() int {
	creds, err := agent.LoadCredentials(os.Getenv(envTokenFile))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child agent:", err)
		return 2
	}
	slots := 1
	if v := os.Getenv(envSlots); v != "" {
		if slots, err = strconv.Atoi(v); err != nil {
			fmt.Fprintln(os.Stderr, "child agent:", envSlots, err)
			return 2
		}
	}
	a, err := agent.New(agent.Config{
		ServerURL: creds.Server, DeviceToken: creds.DeviceToken, Services: []string{runner.ServiceSynthetic},
		Slots: slots, WorkDir: os.Getenv(envWorkDir), Rand: mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64())),
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
		BackoffBase: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child agent:", err)
		return 2
	}
	drain, _ := time.ParseDuration(os.Getenv(envDrainTimeout))
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt, syscall.SIGQUIT)
	if err := a.RunSignalled(context.Background(), sigs, drain); err != nil {
		fmt.Fprintln(os.Stderr, "child agent:", err)
		return 1
	}
	return 0
}

// childAgent is an agent process started by startChildAgent.
type childAgent struct {
	cmd  *exec.Cmd
	logs *logBuffer
	once sync.Once
	// exited is closed when the process has been reaped (err is Wait's).
	exited chan struct{}
	err    error
}

// startChildAgent starts an agent process with the device credentials in
// tokenFile. It is killed when the test ends, if not before.
func startChildAgent(t *testing.T, tokenFile string, env ...string) *childAgent {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envChildAgent+"=1", envTokenFile+"="+tokenFile, envWorkDir+"="+t.TempDir()), env...)
	c := &childAgent{cmd: cmd, logs: newLogBuffer(t, "child agent process"), exited: make(chan struct{})}
	cmd.Stderr = c.logs
	cmd.SysProcAttr = childSysProcAttr()
	require.NoError(t, cmd.Start())
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(c.kill)
	return c
}

// kill sends SIGKILL and reaps the process.
func (c *childAgent) kill() {
	c.once.Do(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
	})
}

// signal sends sig to the process.
func (c *childAgent) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(sig))
}

// waitExit waits for the process to exit on its own and returns Wait's
// error (nil: exit status 0).
func (c *childAgent) waitExit(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case <-c.exited:
		return c.err
	case <-time.After(within):
		t.Fatalf("the agent process did not exit within %s", within)
		return nil
	}
}

// waitLog waits until the process has logged line.
func (c *childAgent) waitLog(t *testing.T, line string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(c.logs.String(), line) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent process never logged %q", line)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
