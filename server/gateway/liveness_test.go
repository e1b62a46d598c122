package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
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

	wrongEpoch := deviceclient.Progress(o, protocol.AttemptRunning)
	wrongEpoch.LeaseEpoch = 2
	deviceclient.MustSend(t, c, wrongEpoch)
	require.Equal(t, protocol.ReasonIdentityMismatch, deviceclient.Expect[protocol.LeaseConflict](t, c).Reason)

	wrongToken := deviceclient.Commit(o, protocol.Output{Key: protocol.OutputKey(o.JobID, o.AttemptID), Bytes: 1,
		SHA256: protocol.HashCommitToken("x")})
	wrongToken.CommitToken = "not-the-token"
	deviceclient.MustSend(t, c, wrongToken)
	require.Equal(t, protocol.CodeCommitConflict, deviceclient.Expect[protocol.CommitRejected](t, c).Code)

	notYet := *wrongToken
	notYet.CommitToken = o.CommitToken // the attempt is leased, not uploading
	deviceclient.MustSend(t, c, &notYet)
	require.Equal(t, protocol.CodeAttemptNotCommittable, deviceclient.Expect[protocol.CommitRejected](t, c).Code)

	deviceclient.MustSend(t, c, deviceclient.Fail(o, "exploded"))
	require.Equal(t, protocol.CodeBadFailureCode, deviceclient.Expect[protocol.FailRejected](t, c).Code)
	forged := deviceclient.Fail(o, protocol.FailRunnerFailed)
	forged.CommitToken = "not-the-token"
	deviceclient.MustSend(t, c, forged)
	require.Equal(t, protocol.CodeFailConflict, deviceclient.Expect[protocol.FailRejected](t, c).Code)

	deviceclient.MustSendRaw(t, c, []byte(`{"type":"progress",`))
	require.Equal(t, protocol.CodeBadMessage, deviceclient.Expect[protocol.ErrorMessage](t, c).Code)

	require.Equal(t, leasedAt, b.lastSeen(t, device1), "a rejected frame heartbeated the device")

	deviceclient.MustSend(t, c, &protocol.Slots{Type: protocol.TypeSlots, SlotsFree: 0})
	require.Eventually(t, func() bool { return b.lastSeen(t, device1).Equal(b.now()) }, deviceclient.Timeout, tick,
		"a slots report heartbeats the device")
	b.clock.Advance(5 * time.Second)
	deviceclient.MustSend(t, c, deviceclient.Progress(o, protocol.AttemptRunning))
	deviceclient.Expect[protocol.ProgressOK](t, c)
	require.Equal(t, b.now(), b.lastSeen(t, device1), "an accepted progress heartbeats the device")
}

// An accepted fail heartbeats the device in its deciding transaction.
func TestAcceptedFailHeartbeats(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Heartbeat: 24 * time.Hour})
	c, o := b.leased(t)
	b.clock.Advance(5 * time.Second)
	deviceclient.MustSend(t, c, deviceclient.Fail(o, protocol.FailRunnerFailed))
	deviceclient.Expect[protocol.FailOK](t, c)
	require.Equal(t, b.now(), b.lastSeen(t, device1))
}
