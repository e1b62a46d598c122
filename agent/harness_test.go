package agent

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/internal/syncbuf"
)

// testBundle is one agent running against its own fake gateway.
type testBundle struct {
	gw      *fakeGateway
	agent   *Agent
	gated   *gatedRunner
	workDir string
	cancel  context.CancelFunc
	done    chan struct{}
	runErr  error
}

// setup starts an agent with two slots offering synthetic.mp4 and two test
// services, fast backoff and debug logs. At cleanup it stops the agent and
// checks that no token or grant signature reached the logs.
func setup(t *testing.T, opts ...func(*Config)) *testBundle {
	t.Helper()
	b := &testBundle{gw: newFakeGateway(t), gated: newGatedRunner(), workDir: t.TempDir(), done: make(chan struct{})}
	logs := &syncbuf.Buffer{}
	runners := runner.Builtin(clock.Real{}, "")
	runners["test.gated"] = b.gated
	runners["test.garbage"] = garbageRunner{}
	cfg := Config{ServerURL: b.gw.srv.URL, DeviceToken: b.gw.token, Slots: 2, WorkDir: b.workDir,
		Services: []string{runner.ServiceSynthetic, "test.gated", "test.garbage"}, Runners: runners,
		Clock: clock.Real{}, Rand: rand.New(rand.NewPCG(1, 2)), HTTPClient: b.gw.srv.Client(),
		Logger:      slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, ShutdownTimeout: 5 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	a, err := New(cfg)
	require.NoError(t, err)
	b.agent = a
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go func() {
		b.runErr = a.Run(ctx)
		close(b.done)
	}()
	t.Cleanup(func() {
		_ = b.stop(t)
		b.gw.mu.Lock()
		defer b.gw.mu.Unlock()
		for _, s := range b.gw.secrets {
			require.NotContains(t, logs.String(), s, "a secret reached the logs")
		}
		if t.Failed() {
			t.Logf("agent logs:\n%s", logs.String())
		}
	})
	return b
}

// wait returns Run's result once it returned on its own.
func (b *testBundle) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-b.done:
		return b.runErr
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

func (b *testBundle) stop(t *testing.T) error {
	b.cancel()
	return b.wait(t)
}

// finalPending reports whether the agent holds a commit or fail for the attempt.
func (a *Agent) finalPending(attemptID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at := a.attempts[attemptID]
	return at != nil && at.final != nil
}

// gatedRunner blocks until the test releases it or the attempt is stopped.
// Stopped, it still writes a valid output and returns nil, as a runner that
// finished at the wrong moment would: the agent must not commit it anyway.
type gatedRunner struct{ started, release, stopped chan struct{} }

func newGatedRunner() *gatedRunner {
	return &gatedRunner{started: make(chan struct{}, 8), release: make(chan struct{}), stopped: make(chan struct{}, 8)}
}

func (g *gatedRunner) Run(ctx context.Context, _ runner.Spec, _, out string) error {
	g.started <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		g.stopped <- struct{}{}
	}
	return os.WriteFile(out, mp4.Synthetic(mp4.SyntheticParams{Seed: "gated"}), 0o600)
}

func awaitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(frameTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// garbageRunner "succeeds" with a file that is not an MP4.
type garbageRunner struct{}

func (garbageRunner) Run(_ context.Context, _ runner.Spec, _, out string) error {
	return os.WriteFile(out, []byte("definitely not an mp4"), 0o600)
}
