package gateway

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/store"
)

// The gateway's own liveness write is coalesced: a frame that proves the
// device alive writes last_seen_at only when the session has not heartbeat
// the device (itself, by hello, or through a lease) for TouchWindow.
func TestTouchIsCoalescedPerWindow(t *testing.T) {
	t.Parallel()
	const window = 5 * time.Second
	b := setup(t, Config{TouchWindow: window})
	counter := store.DBCounter(b.pool)
	require.NotNil(t, counter)
	// No free slot: no offer pass, so no lease heartbeats behind the probe's
	// back; the hello heartbeats at t0.
	c := b.connect(t, token1, 4, 0)
	touches := func() int64 { return counter.Snapshot()[OpTouch].Outside }
	// A slots report proves the device alive (and has no reply); the refused
	// progress behind it, which heartbeats nothing, is answered after the
	// reader has handled the report.
	refused := func() {
		t.Helper()
		deviceclient.MustSend(t, c, &protocol.Slots{Type: protocol.TypeSlots, SlotsFree: 0}) // 0: no offer pass, whose lease would heartbeat too
		deviceclient.MustSend(t, c, &protocol.Progress{Type: protocol.TypeProgress, JobID: protocol.UUIDFrom(rand.Reader),
			AttemptID: protocol.UUIDFrom(rand.Reader), LeaseEpoch: 1, Phase: protocol.AttemptRunning})
		require.Equal(t, protocol.ReasonIdentityMismatch, deviceclient.Expect[protocol.LeaseConflict](t, c).Reason)
	}
	lastSeen := func() time.Time {
		var at time.Time
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT last_seen_at FROM devices WHERE id = $1`,
			device1).Scan(&at))
		return at.UTC()
	}
	before := touches()

	// Inside the window: the gateway writes nothing itself (counted by the
	// pool tracer; a lease of a late offer pass may still heartbeat).
	b.clock.Advance(window - time.Second)
	refused()
	require.Equal(t, before, touches())

	b.clock.Advance(time.Second) // the window has passed: one write at now
	refused()
	refused() // and none again at once
	require.Equal(t, before+1, touches())
	require.Equal(t, b.now(), lastSeen())
	require.NotEqual(t, dbstat.Counts{}, counter.Snapshot()[OpHello], "hello is counted under its own operation")
}

// A hello is one transaction in one round trip (BEGIN, the device's lock,
// the update and COMMIT pipelined), counted by the pool tracer; a revoked
// device's hello writes nothing.
func TestHelloIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	counter := store.DBCounter(b.pool)
	require.NotNil(t, counter)
	b.connect(t, token1, 3, 0)
	require.Equal(t, dbstat.Counts{Transactions: 1, Commits: 1, InTx: 2, RoundTrips: 1}, counter.Snapshot()[OpHello])
	var slots int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT slots_total FROM devices WHERE id = $1`, device1).Scan(&slots))
	require.Equal(t, 3, slots)

	ok, _, err := b.gw.describeDevice(context.Background(), device1, &protocol.Hello{Services: []string{"ffmpeg.transcode"}, SlotsTotal: 5})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = b.pool.Exec(context.Background(), `UPDATE devices SET status = 'revoked' WHERE id = $1`, device1)
	require.NoError(t, err)
	ok, _, err = b.gw.describeDevice(context.Background(), device1, &protocol.Hello{Services: []string{"ffmpeg.transcode"}, SlotsTotal: 1})
	require.NoError(t, err)
	require.False(t, ok, "a revoked device is not described")
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT slots_total FROM devices WHERE id = $1`, device1).Scan(&slots))
	require.Equal(t, 5, slots, "the revoked device's row is as it was")
}
