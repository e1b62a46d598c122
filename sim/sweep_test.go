package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

// sweep runs a sweep and checks the invariants after it.
func (b *testBundle) sweep() protocol.SweepResult {
	b.t.Helper()
	r := b.m.Sweep(b.now)
	b.clean()
	return r
}

func TestSweepNothingDue(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.create(request(buyerRich, svcSynthetic))
	o := b.lease(devA)
	b.now = o.LeaseExpiresAt.Add(-time.Microsecond)
	b.unchanged(func() { require.Equal(t, protocol.SweepResult{}, b.m.Sweep(b.now)) })
}

func TestSweepLostRequeued(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := b.create(request(buyerRich, svcSynthetic))
	o := b.lease(devA)
	b.now = o.LeaseExpiresAt // expires_at <= now: due exactly at expiry
	n := b.journalLen()
	require.Equal(t, protocol.SweepResult{Lost: 1, Requeued: 1}, b.sweep())
	require.Equal(t, []ev{
		{"attempt", "leased", "lost", "lease_expired", protocol.ActorSweeper},
		{"job", "active", "queued", "", protocol.ActorSweeper},
	}, evs(b.journalSince(n)))
	require.Equal(t, protocol.FailLeaseExpired, b.attemptRow(o.AttemptID).FailureCode)
	require.Equal(t, protocol.JobQueued, b.job(id).Status)
	require.Equal(t, 0, b.deviceRow(devA).LiveAttempts)
	require.Equal(t, 2, b.lease(devA).AttemptNumber)
}

func TestSweepLostFailedAtBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	req := request(buyerRich, svcSynthetic)
	req.MaxAttempts = 1
	id := b.create(req)
	b.lease(devA)
	b.tick(time.Minute)
	require.Equal(t, protocol.SweepResult{Lost: 1, Failed: 1}, b.sweep())
	j := b.job(id)
	require.Equal(t, protocol.JobFailed, j.Status)
	require.Equal(t, protocol.FailLeaseExpired, j.FailureCode)
	require.Equal(t, protocol.HoldReleased, j.HoldStatus)
}

func TestSweepLostFailedAtDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	req := request(buyerRich, svcSynthetic)
	req.AdmissionWindow = 30 * time.Second // the lease and the deadline end together
	id := b.create(req)
	b.lease(devA)
	b.tick(30 * time.Second)
	require.Equal(t, protocol.SweepResult{Lost: 1, Failed: 1}, b.sweep())
	require.Equal(t, protocol.FailLeaseExpired, b.job(id).FailureCode)
}

func TestSweepLostOnCancellingJob(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := b.create(request(buyerRich, svcSynthetic))
	b.lease(devA)
	require.Equal(t, protocol.CodeCancelling, b.m.Cancel(b.now, buyerRich, id).Code)
	b.tick(time.Minute)
	n := b.journalLen()
	require.Equal(t, protocol.SweepResult{Lost: 1, Cancelled: 1}, b.sweep())
	require.Equal(t, []ev{
		{"attempt", "leased", "lost", "lease_expired", protocol.ActorSweeper},
		{"job", "cancelling", "cancelled", "", protocol.ActorSweeper},
	}, evs(b.journalSince(n)))
	require.Equal(t, protocol.HoldReleased, b.job(id).HoldStatus)
}

func TestSweepReverifiesAbandonedCommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		outputOK bool
		cancel   bool
		want     protocol.SweepResult
		status   protocol.JobStatus
	}{
		{true, false, protocol.SweepResult{Reverified: 1, Succeeded: 1}, protocol.JobSucceeded},
		{false, false, protocol.SweepResult{Reverified: 1, Failed: 1}, protocol.JobFailed},
		{true, true, protocol.SweepResult{Reverified: 1, Cancelled: 1}, protocol.JobCancelled},
	} {
		b, o := uploading(t)
		require.Equal(t, protocol.CodeCommitPending, b.m.CommitBegin(b.now, devA, commitOf(o), tc.outputOK).Code)
		if tc.cancel {
			require.Equal(t, protocol.CodeCancelling, b.m.Cancel(b.now, buyerRich, o.JobID).Code)
		}
		// Before the verification deadline the sweeper leaves it alone.
		b.tick(29 * time.Second)
		b.unchanged(func() { require.Equal(t, protocol.SweepResult{}, b.m.Sweep(b.now)) })
		b.tick(time.Second)
		n := b.journalLen()
		require.Equal(t, tc.want, b.sweep())
		require.Equal(t, tc.status, b.job(o.JobID).Status)
		for _, e := range b.journalSince(n) {
			require.Equal(t, protocol.ActorSweeper, e.Actor)
		}
	}
}

func TestSweepAdmissionExpired(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	req := request(buyerRich, svcSynthetic)
	req.AdmissionWindow = time.Minute
	id := b.create(req)
	keep := b.create(request(buyerRich, svcSynthetic))
	b.tick(time.Minute)
	n := b.journalLen()
	require.Equal(t, protocol.SweepResult{AdmissionExpired: 1, Failed: 1}, b.sweep())
	require.Equal(t, []ev{{"job", "queued", "failed", "admission_expired", protocol.ActorSweeper}},
		evs(b.journalSince(n)))
	j := b.job(id)
	require.Equal(t, protocol.FailAdmissionExpired, j.FailureCode)
	require.Equal(t, protocol.HoldReleased, j.HoldStatus)
	require.Equal(t, protocol.JobQueued, b.job(keep).Status)
}

func TestSweepDeviceOffline(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	require.Equal(t, protocol.CodeNoJob, b.m.Lease(b.now, devA).Code) // seen, online
	b.m.RevokeDevice(devB)
	b.tick(90*time.Second - time.Microsecond)
	b.unchanged(func() { require.Equal(t, protocol.SweepResult{}, b.m.Sweep(b.now)) })
	b.tick(time.Microsecond)
	require.Equal(t, protocol.SweepResult{Offline: 1}, b.sweep())
	require.Equal(t, protocol.DeviceOffline, b.deviceRow(devA).Status)
	require.Equal(t, protocol.DeviceRevoked, b.deviceRow(devB).Status)
}

func TestSweepOrderAndSteps(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.m.AddDevice("dev-big", []string{svcSynthetic}, 2)
	first := b.create(request(buyerRich, svcSynthetic))
	b.tick(time.Millisecond)
	second := b.create(request(buyerRich, svcSynthetic))
	b.lease("dev-big")
	b.lease("dev-big")
	b.tick(time.Minute)
	n := b.journalLen()
	require.Equal(t, protocol.SweepResult{Lost: 2, Requeued: 2}, b.sweep())
	rows := b.journalSince(n)
	require.Len(t, rows, 4)
	require.Equal(t, []string{first, first, second, second}, []string{rows[0].JobID, rows[1].JobID, rows[2].JobID,
		rows[3].JobID})
}
