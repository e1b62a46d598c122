package e2e

import (
	"context"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"sync"
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
)

// runChildAgent is the child process: it loads the device credentials from
// the token file and runs the agent until it is killed.
func runChildAgent() int {
	creds, err := agent.LoadCredentials(os.Getenv(envTokenFile))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child agent:", err)
		return 2
	}
	a, err := agent.New(agent.Config{
		ServerURL: creds.Server, DeviceToken: creds.DeviceToken, Services: []string{runner.ServiceSynthetic},
		Slots: 1, WorkDir: os.Getenv(envWorkDir), Rand: mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64())),
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
		BackoffBase: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child agent:", err)
		return 2
	}
	if err := a.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "child agent:", err)
		return 1
	}
	return 0
}

// childAgent is an agent process started by startChildAgent.
type childAgent struct {
	cmd  *exec.Cmd
	once sync.Once
}

// startChildAgent starts an agent process with the device credentials in
// tokenFile. It is killed when the test ends, if not before.
func startChildAgent(t *testing.T, tokenFile string) *childAgent {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChildAgent+"=1", envTokenFile+"="+tokenFile, envWorkDir+"="+t.TempDir())
	cmd.Stderr = newLogBuffer(t, "child agent process")
	cmd.SysProcAttr = childSysProcAttr()
	require.NoError(t, cmd.Start())
	c := &childAgent{cmd: cmd}
	t.Cleanup(c.kill)
	return c
}

// kill sends SIGKILL and reaps the process.
func (c *childAgent) kill() {
	c.once.Do(func() {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	})
}
