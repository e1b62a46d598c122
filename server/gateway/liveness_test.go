package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/gateway/gatewaytest"
)

// lastSeen reads a device's devices.last_seen_at.
func (b *bundle) lastSeen(t *testing.T, deviceID string) time.Time {
	t.Helper()
	var seen time.Time
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT last_seen_at FROM devices WHERE id = $1`, deviceID).
		Scan(&seen))
	return seen.UTC()
}

// A frame answered with a rejection heartbeats nothing (docs/semantics.md):
// refused progress, commits and fails and bad frames leave last_seen_at at
// the lease; an accepted frame (slots, progress) moves it. Pings are off
// (a day-long interval on the stub clock), so no pong heartbeats either.
func TestRejectedFramesDoNotHeartbeat(t *testing.T) {
	t.Parallel()
	// A touch window shorter than the 5 s steps, so the slots report writes.
	b := setup(t, Config{Heartbeat: 24 * time.Hour, TouchWindow: time.Second, MaxBadMessages: 100})
	c, o := b.leased(t)
	leasedAt := b.now()
	b.clock.Advance(5 * time.Second)

	wrongEpoch := gatewaytest.Progress(o, protocol.AttemptRunning)
	wrongEpoch.LeaseEpoch = 2
	gatewaytest.MustSend(t, c, wrongEpoch)
	require.Equal(t, protocol.ReasonIdentityMismatch, gatewaytest.Expect[protocol.LeaseConflict](t, c).Reason)

	wrongToken := gatewaytest.Commit(o, protocol.Output{Key: protocol.OutputKey(o.JobID, o.AttemptID), Bytes: 1,
		SHA256: protocol.HashCommitToken("x")})
	wrongToken.CommitToken = "not-the-token"
	gatewaytest.MustSend(t, c, wrongToken)
	require.Equal(t, protocol.CodeCommitConflict, gatewaytest.Expect[protocol.CommitRejected](t, c).Code)

	notYet := *wrongToken
	notYet.CommitToken = o.CommitToken // the attempt is leased, not uploading
	gatewaytest.MustSend(t, c, &notYet)
	require.Equal(t, protocol.CodeAttemptNotCommittable, gatewaytest.Expect[protocol.CommitRejected](t, c).Code)

	gatewaytest.MustSend(t, c, gatewaytest.Fail(o, "exploded"))
	require.Equal(t, protocol.CodeBadFailureCode, gatewaytest.Expect[protocol.FailRejected](t, c).Code)
	forged := gatewaytest.Fail(o, protocol.FailRunnerFailed)
	forged.CommitToken = "not-the-token"
	gatewaytest.MustSend(t, c, forged)
	require.Equal(t, protocol.CodeFailConflict, gatewaytest.Expect[protocol.FailRejected](t, c).Code)

	gatewaytest.MustSendRaw(t, c, []byte(`{"type":"progress",`))
	require.Equal(t, protocol.CodeBadMessage, gatewaytest.Expect[protocol.ErrorMessage](t, c).Code)

	require.Equal(t, leasedAt, b.lastSeen(t, device1), "a rejected frame heartbeated the device")

	gatewaytest.MustSend(t, c, &protocol.Slots{Type: protocol.TypeSlots, SlotsFree: 0})
	require.Eventually(t, func() bool { return b.lastSeen(t, device1).Equal(b.now()) }, gatewaytest.Timeout, tick,
		"a slots report heartbeats the device")
	b.clock.Advance(5 * time.Second)
	gatewaytest.MustSend(t, c, gatewaytest.Progress(o, protocol.AttemptRunning))
	gatewaytest.Expect[protocol.ProgressOK](t, c)
	require.Equal(t, b.now(), b.lastSeen(t, device1), "an accepted progress heartbeats the device")
}

// An accepted fail heartbeats the device in its deciding transaction.
func TestAcceptedFailHeartbeats(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Heartbeat: 24 * time.Hour})
	c, o := b.leased(t)
	b.clock.Advance(5 * time.Second)
	gatewaytest.MustSend(t, c, gatewaytest.Fail(o, protocol.FailRunnerFailed))
	gatewaytest.Expect[protocol.FailOK](t, c)
	require.Equal(t, b.now(), b.lastSeen(t, device1))
}
