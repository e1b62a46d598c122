package gateway

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
)

// An idle session is its reader and one pending heartbeat timer: no offerer
// or ticker goroutine waits beside it, and it wakes for nothing but its
// heartbeat, which pings, heartbeats the device and re-arms. Not parallel:
// it counts the process's goroutines that run session code, so no other
// test's sessions may exist meanwhile.
func TestIdleSessionIsOneGoroutineWokenOnlyByItsHeartbeat(t *testing.T) {
	b := setup(t, Config{})
	b.connect(t, token1, 4, 4)
	b.connect(t, token2, 1, 1)
	// Both hellos' offer passes ran, found no job and ended.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, stacks := sessionGoroutines()
		assert.Equal(c, int64(2), b.gw.Wakeups().Offers, "one offer pass per hello")
		assert.Equal(c, 2, n, "one goroutine per idle session, the reader; running session code:\n%s", stacks)
	}, deviceclient.Timeout, 5*time.Millisecond)
	require.Equal(t, 2, b.clock.Waiters(), "one heartbeat timer per session")
	w0 := b.gw.Wakeups()
	time.Sleep(300 * time.Millisecond)
	w := b.gw.Wakeups().Sub(w0)
	require.Zero(t, w.Idle(), "idle sessions woke: %+v", w)
	require.Zero(t, w.Pings, "no heartbeat is due on the stub clock")

	b.clock.Advance(b.gw.cfg.Heartbeat)
	require.Eventually(t, func() bool {
		n, _ := sessionGoroutines()
		return b.gw.Wakeups().Sub(w0).Pings == 2 && b.clock.Waiters() == 2 && n == 2
	}, deviceclient.Timeout, 5*time.Millisecond, "each session pings once and re-arms")
	w = b.gw.Wakeups().Sub(w0)
	require.Zero(t, w.Idle(), "the heartbeat woke nothing else: %+v", w)
	var seen time.Time
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT last_seen_at FROM devices WHERE id = $1`, device2).Scan(&seen))
	require.True(t, seen.Equal(t0.Add(b.gw.cfg.Heartbeat)), "the pong heartbeats the device: last_seen_at %v", seen)
}

// sessionGoroutines counts the goroutines with session code on their stack
// and returns their stacks.
func sessionGoroutines() (int, string) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var n int
	var out bytes.Buffer
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("rendermac/server/gateway.(*session)")) {
			n++
			out.Write(g)
			out.WriteString("\n\n")
		}
	}
	return n, out.String()
}
