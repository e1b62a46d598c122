package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

// A refused frame mutates nothing, liveness included: after a lease, a
// device that only sends refused progress, commit and fail frames is still
// last seen at the lease and goes offline a heartbeat window later.
func TestRejectedFramesDoNotHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.create(request(buyerRich, svcSynthetic))
	o := b.lease(devA)
	leasedAt := b.now
	b.tick(20 * time.Second)
	wrongEpoch := progressOf(o, protocol.AttemptRunning)
	wrongEpoch.LeaseEpoch = 2
	wrongToken := commitOf(o)
	wrongToken.CommitToken = "not-the-token"
	refused := []func() protocol.Code{
		func() protocol.Code { return b.m.Progress(b.now, devA, wrongEpoch).Code },
		func() protocol.Code { return b.m.CommitBegin(b.now, devA, wrongToken, true).Code },
		func() protocol.Code { return b.m.CommitBegin(b.now, devA, commitOf(o), true).Code }, // still leased
		func() protocol.Code { return b.m.Fail(b.now, devA, failOf(o, "no_such_code")).Code },
		func() protocol.Code {
			f := failOf(o, protocol.FailDownloadFailed)
			f.CommitToken = "not-the-token"
			return b.m.Fail(b.now, devA, f).Code
		},
	}
	want := []protocol.Code{protocol.CodeLeaseConflict, protocol.CodeCommitConflict, protocol.CodeAttemptNotCommittable,
		protocol.CodeBadFailureCode, protocol.CodeFailConflict}
	for i, f := range refused {
		b.unchanged(func() { require.Equal(t, want[i], f()) })
	}
	require.Equal(t, leasedAt, b.deviceRow(devA).LastSeenAt)
	b.tick(70 * time.Second) // leasedAt + HeartbeatWindow
	res := b.sweep()
	require.Equal(t, 1, res.Offline)
	require.Equal(t, protocol.DeviceOffline, b.deviceRow(devA).Status)
}

// Every accepted device operation heartbeats: progress_ok, a commit past
// transaction 1's refusals (commit_pending, and job_cancelled on a
// cancelling job) and fail_ok, each at its own instant.
func TestAcceptedFramesHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.create(request(buyerRich, svcSynthetic))
	o := b.lease(devA)
	b.tick(time.Second)
	b.upload(devA, o)
	require.Equal(t, b.now, b.deviceRow(devA).LastSeenAt)

	b.tick(time.Second)
	require.Equal(t, protocol.CodeCommitPending, b.m.CommitBegin(b.now, devA, commitOf(o), true).Code)
	require.Equal(t, b.now, b.deviceRow(devA).LastSeenAt)
	b.clean()
	b.tick(time.Second)
	require.Equal(t, protocol.CodeCommitPending, b.m.CommitBegin(b.now, devA, commitOf(o), true).Code, "repeated")
	require.Equal(t, b.now, b.deviceRow(devA).LastSeenAt)
	b.clean()

	id := b.create(request(buyerRich, svcSynthetic))
	o2 := b.lease(devB)
	b.upload(devB, o2)
	require.Equal(t, protocol.CodeCancelling, b.m.Cancel(b.now, buyerRich, id).Code)
	b.clean()
	b.tick(time.Second)
	require.Equal(t, protocol.CodeJobCancelled, b.m.CommitBegin(b.now, devB, commitOf(o2), true).Code)
	require.Equal(t, b.now, b.deviceRow(devB).LastSeenAt)
	b.clean()

	b.create(request(buyerRich, svcSynthetic))
	o3 := b.lease(devB)
	b.tick(time.Second)
	require.Equal(t, protocol.CodeFailOK, b.m.Fail(b.now, devB, failOf(o3, protocol.FailRunnerFailed)).Code)
	require.Equal(t, b.now, b.deviceRow(devB).LastSeenAt)
	b.clean()
}
