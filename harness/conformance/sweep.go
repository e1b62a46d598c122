package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/protocol"
)

var sweepCases = []testCase{
	{name: "SweepLostRequeued", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		id := b.create(request(buyerRich, svcSynthetic))
		o := b.lease(devA)
		b.now = o.LeaseExpiresAt.Add(-time.Microsecond)
		b.unchanged(func() { require.Equal(t, protocol.SweepResult{}, b.sweep(), "nothing expired yet") })
		b.now = o.LeaseExpiresAt // expires_at <= now: due exactly at expiry
		n := b.journalLen()
		require.Equal(t, protocol.SweepResult{Lost: 1, Requeued: 1}, b.sweep())
		require.Equal(t, []string{"attempt leased->lost lease_expired sweeper", "job active->queued  sweeper"},
			lines(b.journalSince(n)))
		a := b.attempt(o.AttemptID)
		require.Equal(t, protocol.AttemptLost, a.Status)
		require.Equal(t, protocol.FailLeaseExpired, a.FailureCode)
		require.Equal(t, protocol.JobQueued, b.job(id).Status)
		require.Equal(t, 0, b.device(devA).LiveAttempts)
		require.Equal(t, 2, b.lease(devA).AttemptNumber)
	}},
	{name: "SweepLostFailed", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		spent := request(buyerRich, svcSynthetic)
		spent.MaxAttempts = 1
		late := request(buyerRich, svcSynthetic)
		late.AdmissionWindow = ttl // the lease and the deadline end together
		ids := []string{b.create(spent), b.create(late)}
		b.lease(devA)
		b.lease(devA)
		b.tick(ttl)
		require.Equal(t, protocol.SweepResult{Lost: 2, Failed: 2}, b.sweep())
		for _, id := range ids {
			j := b.job(id)
			require.Equal(t, protocol.JobFailed, j.Status)
			require.Equal(t, protocol.FailLeaseExpired, j.FailureCode)
			require.Equal(t, protocol.HoldReleased, j.HoldStatus)
		}
	}},
	{name: "SweepLostCancelling", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		id := b.create(request(buyerRich, svcSynthetic))
		o := b.lease(devA)
		require.Equal(t, protocol.CodeCancelling, b.cancel(buyerRich, id).Code)
		b.tick(time.Minute)
		n := b.journalLen()
		require.Equal(t, protocol.SweepResult{Lost: 1, Cancelled: 1}, b.sweep())
		require.Equal(t, []string{"attempt leased->lost lease_expired sweeper", "job cancelling->cancelled  sweeper"},
			lines(b.journalSince(n)))
		j := b.job(id)
		require.Equal(t, protocol.JobCancelled, j.Status)
		require.Equal(t, protocol.HoldReleased, j.HoldStatus)
		require.Equal(t, protocol.AttemptLost, b.attempt(o.AttemptID).Status)
	}},
	{name: "SweepReverifiesAbandonedCommits", run: sweepReverifies},
	{name: "SweepAdmissionExpired", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		req := request(buyerRich, svcSynthetic)
		req.AdmissionWindow = time.Minute
		id := b.create(req)
		keep := b.create(request(buyerRich, svcSynthetic))
		b.tick(time.Minute - time.Microsecond)
		b.unchanged(func() { require.Equal(t, protocol.SweepResult{}, b.sweep()) })
		b.tick(time.Microsecond)
		n := b.journalLen()
		require.Equal(t, protocol.SweepResult{AdmissionExpired: 1, Failed: 1}, b.sweep())
		require.Equal(t, []string{"job queued->failed admission_expired sweeper"}, lines(b.journalSince(n)))
		require.Equal(t, []string{"job ->queued  buyer", "job queued->failed admission_expired sweeper"}, b.journalOf(id))
		j := b.job(id)
		require.Equal(t, protocol.JobFailed, j.Status)
		require.Equal(t, protocol.FailAdmissionExpired, j.FailureCode)
		require.Equal(t, protocol.HoldReleased, j.HoldStatus)
		require.Equal(t, protocol.JobQueued, b.job(keep).Status)
	}},
	{name: "SweepOfflineDevices", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		require.Equal(t, protocol.CodeNoJob, b.leaseReply(devA).Code) // seen, online
		_, revokes := b.tg.(Revoker)
		if revokes {
			b.revoke(devB)
		}
		b.tick(fuzz.WorldHeartbeatWindow - time.Microsecond)
		b.unchanged(func() { require.Equal(t, protocol.SweepResult{}, b.sweep()) })
		b.tick(time.Microsecond)
		// Never-seen devices are already offline.
		require.Equal(t, protocol.SweepResult{Offline: 1}, b.sweep())
		require.Equal(t, protocol.DeviceOffline, b.device(devA).Status)
		if revokes {
			require.Equal(t, protocol.DeviceRevoked, b.device(devB).Status)
		}
		b.tick(time.Hour)
		require.Equal(t, protocol.SweepResult{}, b.sweep())
	}},
}

// A server that died between the commit transactions: the sweeper verifies
// each abandoned commit again and finishes it, whatever it finds.
func sweepReverifies(t *testing.T, setup func(*testing.T) *bundle) {
	b := setup(t)
	good, bad, cancelled := b.uploading(devA), b.uploading(devA), b.uploading(devB)
	badCommit := b.commitOf(bad)
	badCommit.Output.Bytes++
	for _, c := range []struct {
		dev string
		c   protocol.Commit
	}{{devA, b.commitOf(good)}, {devA, badCommit}, {devB, b.commitOf(cancelled)}} {
		require.Equal(t, protocol.CodeCommitPending, b.commitBegin(c.dev, c.c).Code)
	}
	require.Equal(t, protocol.CodeCancelling, b.cancel(buyerRich, cancelled.JobID).Code)

	// Before the verification deadline the sweeper leaves them alone.
	b.tick(ttl - time.Microsecond)
	b.unchanged(func() { require.Equal(t, protocol.SweepResult{}, b.sweep(), "verification deadline not reached") })
	b.tick(time.Microsecond)
	n := b.journalLen()
	require.Equal(t, protocol.SweepResult{Reverified: 3, Succeeded: 1, Failed: 1, Cancelled: 1}, b.sweep())
	require.Equal(t, protocol.JobSucceeded, b.job(good.JobID).Status)
	require.Equal(t, protocol.JobFailed, b.job(bad.JobID).Status)
	require.Equal(t, protocol.FailVerificationFailed, b.job(bad.JobID).FailureCode)
	require.Equal(t, protocol.JobCancelled, b.job(cancelled.JobID).Status)
	for _, e := range b.journalSince(n) {
		require.Equal(t, protocol.ActorSweeper, e.Actor)
	}
	journal := b.journalOf(good.JobID)
	require.Equal(t, []string{"attempt committing->succeeded  sweeper", "job verifying->succeeded  sweeper"},
		journal[len(journal)-2:])
	require.Equal(t, protocol.SweepResult{}, b.sweep(), "a second sweep finds nothing")
}
