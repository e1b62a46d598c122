package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

func TestLeaseOffer(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := b.create(request(buyerRich, svcSynthetic))
	b.tick(time.Second)
	n := b.journalLen()
	o := b.lease(devA)

	require.Equal(t, id, o.JobID)
	require.True(t, protocol.ValidID(o.AttemptID))
	require.Equal(t, 1, o.AttemptNumber)
	require.Equal(t, 1, o.LeaseEpoch)
	require.Len(t, o.CommitToken, 32) // 24 bytes, base64url without padding
	require.Equal(t, b.now.Add(30*time.Second), o.LeaseExpiresAt)

	a := b.attemptRow(o.AttemptID)
	require.Equal(t, protocol.AttemptRow{ID: o.AttemptID, JobID: id, DeviceID: devA, Number: 1,
		Status: protocol.AttemptLeased, LeaseEpoch: 1, LeaseExpiresAt: o.LeaseExpiresAt,
		TokenHash: protocol.HashCommitToken(o.CommitToken)}, a)
	j := b.job(id)
	require.Equal(t, protocol.JobActive, j.Status)
	require.Equal(t, 1, j.AttemptCount)
	require.Equal(t, protocol.DeviceRow{ID: devA, Status: protocol.DeviceOnline, LiveAttempts: 1, LastSeenAt: b.now},
		b.deviceRow(devA))
	// The attempt's row comes before the job's.
	require.Equal(t, []ev{
		{"attempt", "", "leased", "", protocol.ActorMatcher},
		{"job", "queued", "active", "", protocol.ActorMatcher},
	}, evs(b.journalSince(n)))
}

func TestLeaseNoJob(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	require.Equal(t, protocol.Reply{Code: protocol.CodeNoJob}, b.m.Lease(b.now, devA))
	// Step 3 happens before the pick: the device is seen even without a job.
	require.Equal(t, protocol.DeviceRow{ID: devA, Status: protocol.DeviceOnline, LastSeenAt: b.now}, b.deviceRow(devA))
	b.clean()

	// A job of a service the device does not offer, and one past its
	// deadline that no sweep has failed yet, are not offered either.
	b.create(request(buyerRich, svc720p))
	short := request(buyerRich, svcSynthetic)
	short.AdmissionWindow = time.Minute
	b.create(short)
	b.tick(time.Minute)
	require.Equal(t, protocol.Reply{Code: protocol.CodeNoJob}, b.m.Lease(b.now, devB))
	b.clean()
}

func TestLeaseNoSlot(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.create(request(buyerRich, svcSynthetic))
	b.create(request(buyerRich, svcSynthetic))
	b.lease(devA)
	b.tick(time.Second)
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeNoSlot}, b.m.Lease(b.now, devA))
	})
}

func TestLeaseNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.create(request(buyerRich, svcSynthetic))
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeNotFound}, b.m.Lease(b.now, "dev-unknown"))
	})
	b.m.RevokeDevice(devB)
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeNotFound}, b.m.Lease(b.now, devB))
	})
}

func TestLeaseOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.m.AddDevice("dev-big", []string{svcSynthetic}, 3)
	// Two jobs at the same instant and one a second later: the pick is by
	// created_at, then by id (whatever the ids' draw order).
	first := b.create(request(buyerRich, svcSynthetic))
	second := b.create(request(buyerRich, svcSynthetic))
	b.tick(time.Second)
	third := b.create(request(buyerRich, svcSynthetic))
	lo, hi := first, second
	if hi < lo {
		lo, hi = hi, lo
	}
	for _, want := range []string{lo, hi, third} {
		require.Equal(t, want, b.lease("dev-big").JobID)
	}
}

func TestProgressOK(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.create(request(buyerRich, svcSynthetic))
	o := b.lease(devA)
	b.tick(10 * time.Second)
	n := b.journalLen()
	r := b.m.Progress(b.now, devA, progressOf(o, protocol.AttemptRunning))
	require.Equal(t, protocol.Reply{Code: protocol.CodeProgressOK, JobID: o.JobID, AttemptID: o.AttemptID,
		LeaseExpiresAt: b.now.Add(30 * time.Second)}, r)
	require.Equal(t, []ev{{"attempt", "leased", "running", "", protocol.ActorDevice}}, evs(b.journalSince(n)))
	require.Equal(t, b.now, b.deviceRow(devA).LastSeenAt)
	b.clean()

	// The same phase renews the lease without a journal row.
	b.tick(20 * time.Second)
	n = b.journalLen()
	r = b.m.Progress(b.now, devA, progressOf(o, protocol.AttemptRunning))
	require.Equal(t, protocol.CodeProgressOK, r.Code)
	require.Equal(t, b.now.Add(30*time.Second), b.attemptRow(o.AttemptID).LeaseExpiresAt)
	require.Empty(t, b.journalSince(n))
	b.clean()
}

func TestProgressConflicts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		arrange func(b *testBundle, o protocol.Reply) (string, protocol.Progress)
		reason  protocol.ConflictReason
	}{
		{"unknown attempt", func(b *testBundle, o protocol.Reply) (string, protocol.Progress) {
			p := progressOf(o, protocol.AttemptRunning)
			p.AttemptID = "00000000-0000-4000-8000-000000000000"
			return devA, p
		}, protocol.ReasonIdentityMismatch},
		{"other job id", func(b *testBundle, o protocol.Reply) (string, protocol.Progress) {
			p := progressOf(o, protocol.AttemptRunning)
			p.JobID = b.create(request(buyerRich, svcSynthetic))
			return devA, p
		}, protocol.ReasonIdentityMismatch},
		{"foreign device", func(b *testBundle, o protocol.Reply) (string, protocol.Progress) {
			return devB, progressOf(o, protocol.AttemptRunning)
		}, protocol.ReasonIdentityMismatch},
		{"wrong epoch", func(b *testBundle, o protocol.Reply) (string, protocol.Progress) {
			p := progressOf(o, protocol.AttemptRunning)
			p.LeaseEpoch = 2
			return devA, p
		}, protocol.ReasonIdentityMismatch},
		{"committing", func(b *testBundle, o protocol.Reply) (string, protocol.Progress) {
			b.upload(devA, o)
			require.Equal(b.t, protocol.CodeCommitPending, b.m.CommitBegin(b.now, devA, commitOf(o), true).Code)
			return devA, progressOf(o, protocol.AttemptUploading)
		}, protocol.ReasonAttemptTerminal},
		{"failed", func(b *testBundle, o protocol.Reply) (string, protocol.Progress) {
			require.Equal(b.t, protocol.CodeFailOK, b.m.Fail(b.now, devA, failOf(o, protocol.FailRunnerFailed)).Code)
			return devA, progressOf(o, protocol.AttemptRunning)
		}, protocol.ReasonAttemptTerminal},
		{"job cancelling", func(b *testBundle, o protocol.Reply) (string, protocol.Progress) {
			require.Equal(b.t, protocol.CodeCancelling, b.m.Cancel(b.now, buyerRich, o.JobID).Code)
			return devA, progressOf(o, protocol.AttemptRunning)
		}, protocol.ReasonJobCancelling},
		{"lease expired", func(b *testBundle, o protocol.Reply) (string, protocol.Progress) {
			b.now = o.LeaseExpiresAt // expires_at <= now is expired
			return devA, progressOf(o, protocol.AttemptRunning)
		}, protocol.ReasonLeaseExpired},
		{"phase regression", func(b *testBundle, o protocol.Reply) (string, protocol.Progress) {
			require.Equal(b.t, protocol.CodeProgressOK, b.m.Progress(b.now, devA, progressOf(o, protocol.AttemptRunning)).Code)
			return devA, progressOf(o, protocol.AttemptDownloading)
		}, protocol.ReasonPhaseRegression},
		{"not a lease phase", func(b *testBundle, o protocol.Reply) (string, protocol.Progress) {
			return devA, progressOf(o, protocol.AttemptCommitting)
		}, protocol.ReasonPhaseRegression},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			b.create(request(buyerRich, svcSynthetic))
			o := b.lease(devA)
			b.tick(time.Second)
			dev, p := tc.arrange(b, o)
			b.clean()
			b.unchanged(func() {
				require.Equal(t, conflict(tc.reason), b.m.Progress(b.now, dev, p))
			})
		})
	}
}
