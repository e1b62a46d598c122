package fencing_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
)

// lastSeen is the device's last_seen_at in a snapshot.
func (b *bundle) lastSeen(t *testing.T, device string) time.Time {
	t.Helper()
	return find(t, "device", b.snapshot(t).Devices, device, func(d protocol.DeviceRow) string { return d.ID }).LastSeenAt
}

// A refused commit or fail mutates nothing, liveness included; an accepted
// one heartbeats the device in its deciding transaction (docs/semantics.md).
func TestCommitAndFailHeartbeatOnlyWhenAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	ctx := context.Background()
	offer, c := b.uploaded(t, t0)
	later := t0.Add(5 * time.Second)

	forged := c
	forged.CommitToken = "guess"
	r, err := b.svc.CommitBegin(ctx, later, deviceID, forged)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCommitConflict, r.Code)
	f := failOf(offer, protocol.FailUploadFailed)
	f.LeaseEpoch = 2
	r, err = b.svc.Fail(ctx, later, deviceID, f)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeFailConflict, r.Code)
	r, err = b.svc.Fail(ctx, later, deviceID, failOf(offer, "exploded"))
	require.NoError(t, err)
	require.Equal(t, protocol.CodeBadFailureCode, r.Code)
	require.Equal(t, t0, b.lastSeen(t, deviceID), "a refusal heartbeated the device")

	r, err = b.svc.CommitBegin(ctx, later, deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCommitPending, r.Code)
	require.Equal(t, later, b.lastSeen(t, deviceID), "an accepted commit heartbeats")

	b.createJob(t, later, nil)
	offer2 := b.lease(t, later, deviceID)
	evenLater := later.Add(5 * time.Second)
	r, err = b.svc.Fail(ctx, evenLater, deviceID, failOf(offer2, protocol.FailRunnerFailed))
	require.NoError(t, err)
	require.Equal(t, protocol.CodeFailOK, r.Code)
	require.Equal(t, evenLater, b.lastSeen(t, deviceID), "an accepted fail heartbeats")
}
