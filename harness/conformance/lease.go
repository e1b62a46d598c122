package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

var leaseCases = []testCase{
	{name: "LeaseOffer", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		first := b.create(request(buyerRich, svcSynthetic))
		b.tick(time.Second)
		b.create(request(buyerRich, svcSynthetic))
		b.tick(time.Minute)
		n := b.journalLen()
		o := b.lease(devA)

		require.Equal(t, first, o.JobID, "the oldest queued job first")
		require.True(t, protocol.ValidID(o.AttemptID))
		require.Equal(t, 1, o.AttemptNumber)
		require.Equal(t, 1, o.LeaseEpoch)
		require.Len(t, o.CommitToken, 32) // 24 bytes, base64url without padding
		require.Equal(t, b.now.Add(ttl), o.LeaseExpiresAt)

		a := b.attempt(o.AttemptID)
		require.Equal(t, protocol.AttemptRow{ID: o.AttemptID, JobID: first, DeviceID: devA, Number: 1,
			Status: protocol.AttemptLeased, LeaseEpoch: 1, LeaseExpiresAt: b.now.Add(ttl),
			TokenHash: protocol.HashCommitToken(o.CommitToken)}, a, "only the token's hash is stored")
		require.NotEqual(t, o.CommitToken, a.TokenHash)
		j := b.job(first)
		require.Equal(t, protocol.JobActive, j.Status)
		require.Equal(t, 1, j.AttemptCount)
		require.Equal(t, protocol.DeviceRow{ID: devA, Status: protocol.DeviceOnline, LiveAttempts: 1, LastSeenAt: b.now},
			b.device(devA))
		// The attempt's row comes before the job's.
		require.Equal(t, []string{"attempt ->leased  matcher", "job queued->active  matcher"}, lines(b.journalSince(n)))
		require.Equal(t, []string{"job ->queued  buyer", "attempt ->leased  matcher", "job queued->active  matcher"},
			b.journalOf(first))

		second := b.lease(devA)
		require.NotEqual(t, o.CommitToken, second.CommitToken)
	}},
	{name: "LeaseNoJob", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		require.Equal(t, protocol.Reply{Code: protocol.CodeNoJob}, b.leaseReply(devB))
		// Step 3 happens before the pick: the device is seen even without a job.
		require.Equal(t, protocol.DeviceRow{ID: devB, Status: protocol.DeviceOnline, LastSeenAt: b.now}, b.device(devB))
		b.clean()

		// A job of a service the device does not offer, and one past its
		// deadline that no sweep has failed yet, are not offered either.
		b.create(request(buyerRich, svc720p))
		short := request(buyerRich, svcSynthetic)
		short.AdmissionWindow = time.Second
		b.create(short)
		b.tick(time.Second)
		require.Equal(t, protocol.Reply{Code: protocol.CodeNoJob}, b.leaseReply(devB))
		b.clean()
	}},
	{name: "LeaseNoSlot", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		b.create(request(buyerRich, svcSynthetic))
		b.create(request(buyerRich, svcSynthetic))
		b.lease(devB) // one slot
		leasedAt := b.now
		b.tick(time.Second)
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeNoSlot}, b.leaseReply(devB))
		})
		require.Equal(t, leasedAt, b.device(devB).LastSeenAt, "no_slot comes before the heartbeat")
	}},
	{name: "LeaseNotFound", needs: needStrangers | needRevoke, run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		b.create(request(buyerRich, svcSynthetic))
		b.revoke(devB)
		for _, id := range []string{missingID, "nope", devB} {
			b.unchanged(func() {
				require.Equal(t, protocol.Reply{Code: protocol.CodeNotFound}, b.leaseReply(id), id)
			})
		}
	}},
}

var progressCases = []testCase{
	{name: "ProgressOK", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		b.create(request(buyerRich, svcSynthetic))
		o := b.lease(devA)
		b.tick(10 * time.Second)
		n := b.journalLen()
		r := b.progress(devA, progressOf(o, protocol.AttemptRunning))
		require.Equal(t, protocol.Reply{Code: protocol.CodeProgressOK, JobID: o.JobID, AttemptID: o.AttemptID,
			LeaseExpiresAt: b.now.Add(ttl)}, r)
		require.Equal(t, []string{"attempt leased->running  device"}, lines(b.journalSince(n)))
		require.Equal(t, b.now, b.device(devA).LastSeenAt)
		a := b.attempt(o.AttemptID)
		require.Equal(t, protocol.AttemptRunning, a.Status)
		require.Equal(t, b.now.Add(ttl), a.LeaseExpiresAt)
		require.Equal(t, 1, a.LeaseEpoch, "progress never changes the epoch")
		b.clean()

		// The same phase renews the lease without a journal row.
		b.tick(20 * time.Second)
		n = b.journalLen()
		r = b.progress(devA, progressOf(o, protocol.AttemptRunning))
		require.Equal(t, protocol.CodeProgressOK, r.Code)
		require.Equal(t, b.now.Add(ttl), b.attempt(o.AttemptID).LeaseExpiresAt)
		require.Equal(t, b.now, b.device(devA).LastSeenAt)
		require.Empty(t, b.journalSince(n))
		require.Equal(t, []string{"job ->queued  buyer", "attempt ->leased  matcher", "job queued->active  matcher",
			"attempt leased->running  device"}, b.journalOf(o.JobID))
		b.clean()
	}},
	{name: "ProgressIdentityMismatch", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		b.create(request(buyerRich, svcSynthetic))
		b.tick(time.Second)
		b.create(request(buyerRich, svcSynthetic))
		queued := b.create(request(buyerRich, svcSynthetic))
		o := b.lease(devA)
		other := b.lease(devA)
		b.tick(time.Second)
		cases := map[string]struct {
			device string
			edit   func(*protocol.Progress)
		}{
			"foreign device":  {devB, func(*protocol.Progress) {}},
			"wrong epoch":     {devA, func(p *protocol.Progress) { p.LeaseEpoch = 2 }},
			"unknown attempt": {devA, func(p *protocol.Progress) { p.AttemptID = missingID }},
			"other attempt":   {devA, func(p *protocol.Progress) { p.AttemptID = other.AttemptID }},
			"missing job":     {devA, func(p *protocol.Progress) { p.JobID = missingID }},
			"queued job":      {devA, func(p *protocol.Progress) { p.JobID = queued }},
		}
		for name, c := range cases {
			p := progressOf(o, protocol.AttemptRunning)
			c.edit(&p)
			b.unchanged(func() {
				require.Equal(t, conflict(protocol.ReasonIdentityMismatch), b.progress(c.device, p), name)
			})
		}
	}},
	{name: "ProgressConflicts", run: progressConflicts},
}

func progressConflicts(t *testing.T, setup func(*testing.T) *bundle) {
	cases := []struct {
		name    string
		arrange func(b *bundle, o protocol.Reply) protocol.Progress
		reason  protocol.ConflictReason
		// malformed: the wire refuses the frame before the contract sees it.
		malformed bool
	}{
		{"committing", func(b *bundle, o protocol.Reply) protocol.Progress {
			b.phase(devA, o, protocol.AttemptUploading)
			require.Equal(b.t, protocol.CodeCommitPending, b.commitBegin(devA, b.commitOf(o)).Code)
			return progressOf(o, protocol.AttemptUploading)
		}, protocol.ReasonAttemptTerminal, false},
		{"failed", func(b *bundle, o protocol.Reply) protocol.Progress {
			require.Equal(b.t, protocol.CodeFailOK, b.fail(devA, failOf(o, protocol.FailRunnerFailed)).Code)
			return progressOf(o, protocol.AttemptRunning)
		}, protocol.ReasonAttemptTerminal, false},
		{"job cancelling", func(b *bundle, o protocol.Reply) protocol.Progress {
			require.Equal(b.t, protocol.CodeCancelling, b.cancel(buyerRich, o.JobID).Code)
			return progressOf(o, protocol.AttemptRunning)
		}, protocol.ReasonJobCancelling, false},
		{"job cancelling past the lease", func(b *bundle, o protocol.Reply) protocol.Progress {
			require.Equal(b.t, protocol.CodeCancelling, b.cancel(buyerRich, o.JobID).Code)
			// Even an expired lease reports job_cancelling: that check comes first.
			b.now = o.LeaseExpiresAt
			return progressOf(o, protocol.AttemptRunning)
		}, protocol.ReasonJobCancelling, false},
		{"lease expired", func(b *bundle, o protocol.Reply) protocol.Progress {
			b.now = o.LeaseExpiresAt.Add(-time.Microsecond)
			b.phase(devA, o, protocol.AttemptLeased)
			b.now = b.now.Add(ttl - time.Microsecond)
			r := b.progress(devA, progressOf(o, protocol.AttemptRunning))
			require.Equal(b.t, protocol.CodeProgressOK, r.Code)
			b.now = r.LeaseExpiresAt // lease_expires_at <= now is expired
			return progressOf(o, protocol.AttemptRunning)
		}, protocol.ReasonLeaseExpired, false},
		{"phase regression", func(b *bundle, o protocol.Reply) protocol.Progress {
			b.phase(devA, o, protocol.AttemptRunning)
			return progressOf(o, protocol.AttemptDownloading)
		}, protocol.ReasonPhaseRegression, false},
		{"not a lease phase", func(_ *bundle, o protocol.Reply) protocol.Progress {
			return progressOf(o, protocol.AttemptCommitting)
		}, protocol.ReasonPhaseRegression, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if tc.malformed && !b.opts.MalformedFrames {
				t.Skip("the target's wire refuses the frame as bad_message")
			}
			b.create(request(buyerRich, svcSynthetic))
			o := b.lease(devA)
			b.tick(time.Second)
			p := tc.arrange(b, o)
			b.clean()
			status := b.attempt(o.AttemptID).Status
			b.unchanged(func() {
				require.Equal(t, conflict(tc.reason), b.progress(devA, p))
			})
			require.Equal(t, status, b.attempt(o.AttemptID).Status)
		})
	}
}
