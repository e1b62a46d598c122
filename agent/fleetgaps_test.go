package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/tcpproxy"
	"github.com/rendermac/rendermac/protocol"
)

// The agent's own defences against what a Mac goes through: a Wi-Fi
// change or a wake from sleep (a half-open connection), a full disk, a
// crash that left attempt files behind, a gateway that dies.

// shortWelcome is a welcome whose 600 ms lease makes the agent heartbeat,
// ping and re-check its disk every 200 ms.
func shortWelcome(c *gwConn, t *testing.T) {
	t.Helper()
	next[protocol.Hello](t, c)
	c.send(t, &protocol.Welcome{Type: protocol.TypeWelcome, DeviceID: "dev-1", LeaseTTLMs: 600, HeartbeatMs: 60_000})
}

func TestHalfOpenConnectionIsDroppedWithinTheBoundAndTheAgentReconnects(t *testing.T) {
	t.Parallel()
	var proxy *tcpproxy.Proxy
	b := setup(t, func(c *Config) {
		p, err := tcpproxy.New(strings.TrimPrefix(c.ServerURL, "http://"))
		require.NoError(t, err)
		t.Cleanup(p.Close)
		proxy = p
		c.ServerURL = "http://" + p.Addr()
	})
	c := b.gw.nextConn(t)
	shortWelcome(c, t)
	bound := DeadConnectionBound(Config{}, 600*time.Millisecond)
	require.Equal(t, 400*time.Millisecond, bound, "a third of the lease each for interval and timeout")
	// An attempt in flight shows the session is open (the welcome crossed).
	o := b.gw.offer("test.gated", nil, nil)
	c.send(t, o)
	c.expectSlots(t, 1)
	c.expectProgress(t, o, protocol.AttemptDownloading)

	// Wi-Fi loss: the connection carries nothing any more, nothing is
	// closed; the network comes back at once, for new connections only.
	lost := time.Now()
	require.Equal(t, 1, proxy.BlackHole())
	proxy.Heal()
	c2 := b.gw.nextConn(t)
	took := time.Since(lost)
	h := next[protocol.Hello](t, c2)
	require.Equal(t, 1, h.SlotsFree, "the attempt is still held across the reconnect")
	// Detection within the bound, plus the backoff (5 ms at most) and the
	// dial; the slack is for a loaded machine.
	require.Less(t, took, bound+2*time.Second, "the dead connection went unnoticed too long")
	select {
	case <-c.closed:
		t.Fatal("the gateway saw the old connection end: the black hole leaked a FIN or RST")
	default:
	}
}

// fullDiskRunner writes its output where the kernel answers ENOSPC.
type fullDiskRunner struct{}

func (fullDiskRunner) Run(ctx context.Context, spec runner.Spec, in, out string) error {
	if err := os.Symlink("/dev/full", out); err != nil {
		return err
	}
	return runner.Synthetic{Clock: clock.Real{}}.Run(ctx, spec, in, out)
}

func TestENOSPCWhileRenderingFailsNoCapacityNotRunnerFailed(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	b := setup(t, func(c *Config) {
		c.Runners["test.fulldisk"] = fullDiskRunner{}
		c.Services = append(c.Services, "test.fulldisk")
	})
	c := b.gw.nextConn(t)
	c.handshake(t, 2)
	o := b.gw.offer("test.fulldisk", nil, nil)
	c.send(t, o)
	c.expectSlots(t, 1)
	c.expectProgress(t, o, protocol.AttemptDownloading)
	c.expectProgress(t, o, protocol.AttemptRunning)
	f := c.expectFail(t, o, protocol.FailNoCapacity)
	require.Contains(t, f.Message, "out of space")
	require.Contains(t, f.Message, "no space left on device")
	c.expectSlots(t, 2)
}

// mountTmpfs mounts a tmpfs of size bytes at dir, or skips the test where
// mounting is not allowed (not root, no mount binary).
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); the /dev/full test covers ENOSPC", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

func TestFullTmpfsFailsRetryableStopsOffersAndResumesWhenFreed(t *testing.T) {
	t.Parallel()
	work := filepath.Join(t.TempDir(), "work")
	require.NoError(t, os.MkdirAll(work, 0o700))
	mountTmpfs(t, work, 1<<20)
	b := setup(t, func(c *Config) { c.WorkDir = work; c.MinFreeBytes = 256 << 10 })
	c := b.gw.nextConn(t)
	// A 3 s lease TTL: the agent pings and re-checks the disk every second
	// (a third of it), so a pong late by a loaded machine's 200 ms does not
	// drop this session: the test is about the disk, and a reconnect would
	// lose the frames it waits for.
	next[protocol.Hello](t, c)
	c.send(t, &protocol.Welcome{Type: protocol.TypeWelcome, DeviceID: "dev-1", LeaseTTLMs: 3_000, HeartbeatMs: 60_000})

	// Mid-render: a 2 MiB output on a 1 MiB file system.
	o := b.gw.offer(runner.ServiceSynthetic, map[string]string{"mdat_bytes": "2097152"}, nil)
	c.send(t, o)
	c.expectSlots(t, 1)
	c.expectProgress(t, o, protocol.AttemptDownloading)
	c.expectProgress(t, o, protocol.AttemptRunning)
	f := skipProgress[protocol.Fail](t, c)
	require.Equal(t, protocol.FailNoCapacity, f.FailureCode, f.Message)
	require.Contains(t, f.Message, "out of space")
	c.send(t, &protocol.FailOK{Type: protocol.TypeFailOK, JobID: o.JobID, AttemptID: o.AttemptID})
	c.expectSlots(t, 2)

	// Something else fills the disk: the agent reports no free slot and
	// refuses an offer that still arrives, retryably.
	ballast := filepath.Join(work, "ballast")
	require.NoError(t, os.WriteFile(ballast, make([]byte, 900<<10), 0o600))
	c.expectSlots(t, 0)
	o2 := b.gw.offer(runner.ServiceSynthetic, nil, nil)
	c.send(t, o2)
	f = c.expectFail(t, o2, protocol.FailNoCapacity)
	require.Contains(t, f.Message, "below the minimum")

	// Space again: offers again.
	require.NoError(t, os.Remove(ballast))
	c.expectSlots(t, 2)
}

func TestMinFreeCheckRefusesOffersWithoutAMount(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.MinFreeBytes = 1 << 62 })
	c := b.gw.nextConn(t)
	c.handshake(t, 0)
	o := b.gw.offer(runner.ServiceSynthetic, nil, nil)
	c.send(t, o)
	f := c.expectFail(t, o, protocol.FailNoCapacity)
	require.Contains(t, f.Message, "below the minimum")
	b2 := setup(t, func(c *Config) { c.MinFreeBytes = -1 })
	b2.gw.nextConn(t).handshake(t, 2)
}

func TestStaleAttemptDirsAreRemovedAtStart(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	stale := filepath.Join(work, "0b4c8a5e-3f1d-4a7b-9c2e-5d6f7a8b9c0d")
	require.NoError(t, os.MkdirAll(stale, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(stale, "output.mp4"), []byte("half a render"), 0o600))
	keep := filepath.Join(work, "not-an-attempt")
	require.NoError(t, os.MkdirAll(keep, 0o700))
	b := setup(t, func(c *Config) { c.WorkDir = work })
	b.gw.nextConn(t).handshake(t, 2)
	_, err := os.Stat(stale)
	require.ErrorIs(t, err, os.ErrNotExist, "the stale attempt dir is gone")
	_, err = os.Stat(keep)
	require.NoError(t, err, "what is not an attempt dir stays")
}

func TestFailoverToTheNextGatewayWhenOneDies(t *testing.T) {
	t.Parallel()
	var second *fakeGateway
	b := setup(t, func(c *Config) {
		second = newFakeGateway(t)
		c.FailoverURLs = []string{second.srv.URL}
	})
	second.token = b.gw.token
	c := b.gw.nextConn(t)
	c.handshake(t, 2)
	// The first gateway dies: its connection drops and it accepts no more.
	b.gw.srv.Listener.Close()
	c.ws.CloseNow()
	c2 := second.nextConn(t)
	c2.handshake(t, 2)
}

// skipProgress returns the next frame that is not a progress (heartbeats
// of a short lease interleave with the frames a test waits for).
func skipProgress[T any](t *testing.T, c *gwConn) *T {
	t.Helper()
	for {
		select {
		case f := <-c.frames:
			if _, ok := f.(*protocol.Progress); ok {
				continue
			}
			m, ok := f.(*T)
			require.Truef(t, ok, "want %T, got %T %+v", m, f, f)
			return m
		case <-time.After(frameTimeout):
			var zero T
			t.Fatalf("no %T frame arrived", &zero)
			return nil
		}
	}
}
