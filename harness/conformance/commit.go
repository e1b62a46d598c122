package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

var commitCases = []testCase{
	{name: "CommitOK", run: commitOK},
	{name: "CommitRepeatedIsPending", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		o := b.uploading(devA)
		require.Equal(t, protocol.CodeCommitPending, b.commitBegin(devA, b.commitOf(o)).Code)
		before := b.snapshot()
		// A duplicated frame, even one past the first lease's expiry: the
		// attempt is committing, so the lease check does not apply.
		b.now = o.LeaseExpiresAt
		require.Equal(t, protocol.Reply{Code: protocol.CodeCommitPending}, b.commitBegin(devA, b.commitOf(o)))
		// Nothing changes but the heartbeat: the frame passed the fence.
		for i := range before.Devices {
			if before.Devices[i].ID == devA {
				before.Devices[i].LastSeenAt = b.now
			}
		}
		require.Equal(t, before, b.snapshot())
	}},
	{name: "CommitConflict", run: commitConflict},
	{name: "CommitConflictStaleToken", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		// A token of a previous attempt of the same job gives no authority
		// over the next attempt, even on the same device.
		b := setup(t)
		b.create(request(buyerRich, svcSynthetic))
		first := b.lease(devA)
		require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK, Requeued: true},
			b.fail(devA, failOf(first, protocol.FailUploadFailed)))
		second := b.lease(devA)
		require.Equal(t, first.JobID, second.JobID)
		require.Equal(t, 2, second.AttemptNumber)
		b.phase(devA, second, protocol.AttemptUploading)

		// The second attempt's identities with the first attempt's token, and
		// the first attempt's identities with its own (now dead) token.
		withOld := b.commitOf(second)
		withOld.CommitToken = first.CommitToken
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeCommitConflict}, b.commitBegin(devA, withOld))
			require.Equal(t, protocol.Reply{Code: protocol.CodeCommitConflict}, b.commit(devA, withOld))
			require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: protocol.AttemptFailed},
				b.commitBegin(devA, b.commitOf(first)))
		})
		require.Equal(t, protocol.AttemptUploading, b.attempt(second.AttemptID).Status)
	}},
	{name: "CommitAttemptNotCommittable", run: commitAttemptNotCommittable},
	{name: "CommitLeaseExpired", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		o := b.uploading(devA)
		b.now = b.attempt(o.AttemptID).LeaseExpiresAt
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeLeaseExpired}, b.commitBegin(devA, b.commitOf(o)))
			require.Equal(t, protocol.Reply{Code: protocol.CodeLeaseExpired}, b.commit(devA, b.commitOf(o)))
		})
		require.Equal(t, protocol.AttemptUploading, b.attempt(o.AttemptID).Status)
	}},
	{name: "CommitJobCancelledBeforeTxn1", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		o := b.uploading(devA)
		require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, b.cancel(buyerRich, o.JobID))
		n := b.journalLen()
		require.Equal(t, protocol.Reply{Code: protocol.CodeJobCancelled}, b.commit(devA, b.commitOf(o)))
		b.clean()
		require.Equal(t, []string{"attempt uploading->cancelled buyer_cancelled device", "job cancelling->cancelled  device"},
			lines(b.journalSince(n)))
		journal := b.journalOf(o.JobID)
		require.Equal(t, "job active->cancelling  buyer", journal[len(journal)-3])
		j := b.job(o.JobID)
		require.Equal(t, protocol.JobCancelled, j.Status)
		require.Equal(t, protocol.HoldReleased, j.HoldStatus)
		require.Equal(t, 1, j.Webhooks)
		require.Empty(t, j.OutputSHA256)
		require.Equal(t, protocol.FailBuyerCancelled, b.attempt(o.AttemptID).FailureCode)
		require.Equal(t, protocol.BuyerRow{ID: buyerRich, BalanceCents: balanceOf(buyerRich)}, b.buyer(buyerRich))
		require.Equal(t, 0, b.device(devA).LiveAttempts)
	}},
	{name: "CommitJobCancelledBetweenTransactions", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		o := b.uploading(devA)
		require.Equal(t, protocol.CodeCommitPending, b.commitBegin(devA, b.commitOf(o)).Code)
		require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, b.cancel(buyerRich, o.JobID), "verifying -> cancelling")
		b.clean()
		n := b.journalLen()
		// The output is fine, and still loses.
		require.Equal(t, protocol.Reply{Code: protocol.CodeJobCancelled}, b.commitFinish(o.JobID, o.AttemptID))
		b.clean()
		require.Equal(t, []string{"attempt committing->cancelled buyer_cancelled verifier", "job cancelling->cancelled  verifier"},
			lines(b.journalSince(n)))
		journal := b.journalOf(o.JobID)
		require.Equal(t, "job verifying->cancelling  buyer", journal[len(journal)-3])
		j := b.job(o.JobID)
		require.Equal(t, protocol.JobCancelled, j.Status)
		require.Equal(t, protocol.HoldReleased, j.HoldStatus)
		require.Empty(t, j.SucceededAttemptID)
		require.Empty(t, j.OutputSHA256)
	}},
	{name: "CommitVerificationFailed", run: commitVerificationFailed},
}

func commitOK(t *testing.T, setup func(*testing.T) *bundle) {
	b := setup(t)
	o := b.uploading(devA)
	c := b.commitOf(o)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitPending}, b.commitBegin(devA, c))
	b.clean()
	a := b.attempt(o.AttemptID)
	require.Equal(t, protocol.AttemptCommitting, a.Status)
	require.Equal(t, b.now.Add(ttl), a.LeaseExpiresAt, "the verification deadline")
	require.Equal(t, protocol.JobVerifying, b.job(o.JobID).Status)
	require.Equal(t, 1, b.device(devA).LiveAttempts, "committing still holds the slot")

	// A repeated commit changes nothing and is still pending, whatever its
	// output would say.
	b.unchanged(func() {
		r, err := b.tg.CommitBegin(b.ctx, b.now, devA, c, false)
		requireNoError(t, err)
		require.Equal(t, protocol.Reply{Code: protocol.CodeCommitPending}, normal(r))
	})

	b.tick(time.Second)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitOK}, b.commitFinish(o.JobID, o.AttemptID))
	b.clean()
	j := b.job(o.JobID)
	require.Equal(t, protocol.JobSucceeded, j.Status)
	require.Equal(t, c.Output.SHA256, j.OutputSHA256)
	require.Equal(t, o.AttemptID, j.SucceededAttemptID)
	require.Equal(t, protocol.HoldCaptured, j.HoldStatus)
	require.Equal(t, 1, j.Webhooks)
	require.Equal(t, protocol.BuyerRow{ID: buyerRich, BalanceCents: balanceOf(buyerRich) - price, CapturedCents: price},
		b.buyer(buyerRich))
	require.Equal(t, protocol.AttemptSucceeded, b.attempt(o.AttemptID).Status)
	require.Equal(t, 0, b.device(devA).LiveAttempts, "the slot is free once txn2 committed")
	require.Equal(t, []string{"job ->queued  buyer", "attempt ->leased  matcher", "job queued->active  matcher",
		"attempt leased->uploading  device", "attempt uploading->committing  device", "job active->verifying  device",
		"attempt committing->succeeded  verifier", "job verifying->succeeded  verifier"}, b.journalOf(o.JobID))

	// Once finished, both transactions refuse the attempt.
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: protocol.AttemptSucceeded},
			b.commit(devA, c))
		require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: protocol.AttemptSucceeded},
			b.commitFinish(o.JobID, o.AttemptID))
	})

	// A whole commit runs the same steps in one call.
	o2 := b.uploading(devA)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitOK}, b.commit(devA, b.commitOf(o2)))
	b.clean()
	require.Equal(t, protocol.JobSucceeded, b.job(o2.JobID).Status)
}

func commitConflict(t *testing.T, setup func(*testing.T) *bundle) {
	b := setup(t)
	o := b.uploading(devA)
	other := b.uploading(devA)
	edits := map[string]func(*protocol.Commit) string{
		"foreign device":               func(*protocol.Commit) string { return devB },
		"wrong epoch":                  func(c *protocol.Commit) string { c.LeaseEpoch = 2; return devA },
		"wrong token":                  func(c *protocol.Commit) string { c.CommitToken = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"; return devA },
		"longer token":                 func(c *protocol.Commit) string { c.CommitToken += "x"; return devA },
		"token hash instead of token":  func(c *protocol.Commit) string { c.CommitToken = protocol.HashCommitToken(c.CommitToken); return devA },
		"other's token":                func(c *protocol.Commit) string { c.CommitToken = other.CommitToken; return devA },
		"unknown attempt":              func(c *protocol.Commit) string { c.AttemptID = missingID; return devA },
		"missing job":                  func(c *protocol.Commit) string { c.JobID = missingID; return devA },
		"other job":                    func(c *protocol.Commit) string { c.JobID = other.JobID; return devA },
		"other attempt of another job": func(c *protocol.Commit) string { c.AttemptID = other.AttemptID; return devA },
	}
	if b.opts.Strangers {
		edits["bad attempt id"] = func(c *protocol.Commit) string { c.AttemptID = "x"; return devA }
	}
	for name, edit := range edits {
		c := b.commitOf(o)
		dev := edit(&c)
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeCommitConflict}, b.commitBegin(dev, c), name)
			require.Equal(t, protocol.Reply{Code: protocol.CodeCommitConflict}, b.commit(dev, c), name)
		})
	}
	require.Equal(t, protocol.AttemptUploading, b.attempt(o.AttemptID).Status)
}

func commitAttemptNotCommittable(t *testing.T, setup func(*testing.T) *bundle) {
	b := setup(t)
	b.create(request(buyerRich, svcSynthetic))
	o := b.lease(devA)
	for _, phase := range []protocol.AttemptStatus{protocol.AttemptLeased, protocol.AttemptRunning} {
		b.phase(devA, o, phase)
		b.unchanged(func() {
			want := protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: phase}
			require.Equal(t, want, b.commitBegin(devA, b.commitOf(o)))
			require.Equal(t, want, b.commit(devA, b.commitOf(o)))
			require.Equal(t, want, b.commitFinish(o.JobID, o.AttemptID))
		})
	}
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable}, b.commitFinish(o.JobID, missingID))
		require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable}, b.commitFinish(missingID, o.AttemptID))
	})

	// After success the attempt is terminal; a late duplicate is refused,
	// and so is a second transaction 2.
	done := b.uploading(devA)
	c := b.commitOf(done)
	require.Equal(t, protocol.CodeCommitOK, b.commit(devA, c).Code)
	b.unchanged(func() {
		want := protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: protocol.AttemptSucceeded}
		require.Equal(t, want, b.commit(devA, c))
		require.Equal(t, want, b.commitFinish(c.JobID, c.AttemptID))
		require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable}, b.commitFinish(c.JobID, missingID))
	})
}

func commitVerificationFailed(t *testing.T, setup func(*testing.T) *bundle) {
	b := setup(t)
	cases := map[string]func(c *protocol.Commit){
		"wrong sha":  func(c *protocol.Commit) { c.Output.SHA256 = inputSHA },
		"wrong size": func(c *protocol.Commit) { c.Output.Bytes++ },
		// The claimed key is part of verification and needs no store.
		"foreign key":     func(c *protocol.Commit) { c.Output.Key = "outputs/x/y.mp4" },
		"other job's key": func(c *protocol.Commit) { c.Output.Key = protocol.OutputKey(c.JobID, c.JobID) },
	}
	if b.opts.MalformedFrames {
		// Malformed claims are judged by verification, not refused on the way.
		cases["negative size"] = func(c *protocol.Commit) { c.Output.Bytes = -1 }
		cases["malformed sha"] = func(c *protocol.Commit) { c.Output.SHA256 = "XYZ" }
	}
	for name, breakIt := range cases {
		o := b.uploading(devA)
		c := b.commitOf(o)
		breakIt(&c)
		n := b.journalLen()
		require.Equal(t, protocol.Reply{Code: protocol.CodeVerificationFailed}, b.commit(devA, c), name)
		b.clean()
		j := b.job(o.JobID)
		require.Equal(t, protocol.JobFailed, j.Status, "%s: not retried although attempts remain", name)
		require.Equal(t, protocol.FailVerificationFailed, j.FailureCode, name)
		require.Equal(t, protocol.HoldReleased, j.HoldStatus, name)
		a := b.attempt(o.AttemptID)
		require.Equal(t, protocol.AttemptFailed, a.Status, name)
		require.Equal(t, protocol.FailVerificationFailed, a.FailureCode, name)
		require.Equal(t, "job verifying->failed verification_failed verifier", line(b.journalSince(n)[3]), name)
	}
	require.Equal(t, protocol.BuyerRow{ID: buyerRich, BalanceCents: balanceOf(buyerRich)}, b.buyer(buyerRich))
}
