package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

// uploading creates a job, leases it on devA and moves it to uploading.
func uploading(t *testing.T) (*testBundle, protocol.Reply) {
	b := setup(t, Config{})
	b.create(request(buyerRich, svcSynthetic))
	o := b.lease(devA)
	b.tick(time.Second)
	b.upload(devA, o)
	b.tick(time.Second)
	return b, o
}

func TestCommitOK(t *testing.T) {
	t.Parallel()
	b, o := uploading(t)
	n := b.journalLen()
	c := commitOf(o)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitPending}, b.m.CommitBegin(b.now, devA, c, true))
	b.clean()
	a := b.attemptRow(o.AttemptID)
	require.Equal(t, protocol.AttemptCommitting, a.Status)
	require.Equal(t, b.now.Add(30*time.Second), a.LeaseExpiresAt) // the verification deadline
	require.Equal(t, protocol.JobVerifying, b.job(o.JobID).Status)
	require.Equal(t, 1, b.deviceRow(devA).LiveAttempts) // committing still holds the slot

	// A repeated commit changes nothing and is still pending.
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeCommitPending}, b.m.CommitBegin(b.now, devA, c, false))
	})

	b.tick(time.Second)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitOK}, b.m.CommitFinish(b.now, o.JobID, o.AttemptID))
	b.clean()
	j := b.job(o.JobID)
	require.Equal(t, protocol.JobSucceeded, j.Status)
	require.Equal(t, c.Output.SHA256, j.OutputSHA256)
	require.Equal(t, o.AttemptID, j.SucceededAttemptID)
	require.Equal(t, protocol.HoldCaptured, j.HoldStatus)
	require.Equal(t, 1, j.Webhooks)
	require.Equal(t, protocol.BuyerRow{ID: buyerRich, BalanceCents: 990, CapturedCents: 10}, b.buyerRow(buyerRich))
	require.Equal(t, 0, b.deviceRow(devA).LiveAttempts)
	require.Equal(t, []ev{
		{"attempt", "uploading", "committing", "", protocol.ActorDevice},
		{"job", "active", "verifying", "", protocol.ActorDevice},
		{"attempt", "committing", "succeeded", "", protocol.ActorVerify},
		{"job", "verifying", "succeeded", "", protocol.ActorVerify},
	}, evs(b.journalSince(n)))

	// Once finished, both transactions refuse the attempt.
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: protocol.AttemptSucceeded},
			b.m.Commit(b.now, devA, c, true))
		require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: protocol.AttemptSucceeded},
			b.m.CommitFinish(b.now, o.JobID, o.AttemptID))
	})
}

func TestCommitBothTransactions(t *testing.T) {
	t.Parallel()
	b, o := uploading(t)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitOK}, b.m.Commit(b.now, devA, commitOf(o), true))
	b.clean()
	require.Equal(t, protocol.JobSucceeded, b.job(o.JobID).Status)
}

func TestCommitConflict(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		dev  string
		mut  func(*protocol.Commit)
	}{
		{"foreign device", devB, func(*protocol.Commit) {}},
		{"wrong epoch", devA, func(c *protocol.Commit) { c.LeaseEpoch = 2 }},
		{"wrong token", devA, func(c *protocol.Commit) { c.CommitToken = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }},
		{"token hash instead of token", devA, func(c *protocol.Commit) { c.CommitToken = protocol.HashCommitToken(c.CommitToken) }},
		{"unknown attempt", devA, func(c *protocol.Commit) { c.AttemptID = "00000000-0000-4000-8000-000000000000" }},
		{"unknown job", devA, func(c *protocol.Commit) { c.JobID = "00000000-0000-4000-8000-000000000000" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, o := uploading(t)
			c := commitOf(o)
			tc.mut(&c)
			b.unchanged(func() {
				require.Equal(t, protocol.Reply{Code: protocol.CodeCommitConflict}, b.m.CommitBegin(b.now, tc.dev, c, true))
				require.Equal(t, protocol.Reply{Code: protocol.CodeCommitConflict}, b.m.Commit(b.now, tc.dev, c, true))
			})
		})
	}
}

func TestCommitConflictStaleToken(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.create(request(buyerRich, svcSynthetic))
	first := b.lease(devA)
	require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK, Requeued: true},
		b.m.Fail(b.now, devA, failOf(first, protocol.FailDownloadFailed)))
	second := b.lease(devA)
	require.Equal(t, 2, second.AttemptNumber)
	b.upload(devA, second)

	// The second attempt's identities with the first attempt's token, and
	// the first attempt's identities with its own (now dead) token.
	withOld := commitOf(second)
	withOld.CommitToken = first.CommitToken
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeCommitConflict}, b.m.CommitBegin(b.now, devA, withOld, true))
		require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: protocol.AttemptFailed},
			b.m.CommitBegin(b.now, devA, commitOf(first), true))
	})
}

func TestCommitAttemptNotCommittable(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.create(request(buyerRich, svcSynthetic))
	o := b.lease(devA)
	for _, phase := range []protocol.AttemptStatus{protocol.AttemptLeased, protocol.AttemptRunning} {
		require.Equal(t, protocol.CodeProgressOK, b.m.Progress(b.now, devA, progressOf(o, phase)).Code)
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: phase},
				b.m.CommitBegin(b.now, devA, commitOf(o), true))
			require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: phase},
				b.m.CommitFinish(b.now, o.JobID, o.AttemptID))
		})
	}
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable},
			b.m.CommitFinish(b.now, o.JobID, "00000000-0000-4000-8000-000000000000"))
		require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable},
			b.m.CommitFinish(b.now, "00000000-0000-4000-8000-000000000000", o.AttemptID))
	})
}

func TestCommitLeaseExpired(t *testing.T) {
	t.Parallel()
	b, o := uploading(t)
	b.now = b.attemptRow(o.AttemptID).LeaseExpiresAt
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeLeaseExpired}, b.m.CommitBegin(b.now, devA, commitOf(o), true))
	})
}

func TestCommitJobCancelledBeforeTxn1(t *testing.T) {
	t.Parallel()
	b, o := uploading(t)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, b.m.Cancel(b.now, buyerRich, o.JobID))
	n := b.journalLen()
	require.Equal(t, protocol.Reply{Code: protocol.CodeJobCancelled}, b.m.CommitBegin(b.now, devA, commitOf(o), true))
	b.clean()
	require.Equal(t, []ev{
		{"attempt", "uploading", "cancelled", "buyer_cancelled", protocol.ActorDevice},
		{"job", "cancelling", "cancelled", "", protocol.ActorDevice},
	}, evs(b.journalSince(n)))
	j := b.job(o.JobID)
	require.Equal(t, protocol.HoldReleased, j.HoldStatus)
	require.Equal(t, 1, j.Webhooks)
	require.Equal(t, protocol.FailBuyerCancelled, b.attemptRow(o.AttemptID).FailureCode)
	require.Equal(t, protocol.BuyerRow{ID: buyerRich, BalanceCents: 1000}, b.buyerRow(buyerRich))
	require.Equal(t, 0, b.deviceRow(devA).LiveAttempts)
}

func TestCommitJobCancelledBetweenTransactions(t *testing.T) {
	t.Parallel()
	b, o := uploading(t)
	require.Equal(t, protocol.CodeCommitPending, b.m.CommitBegin(b.now, devA, commitOf(o), true).Code)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, b.m.Cancel(b.now, buyerRich, o.JobID))
	b.clean()
	n := b.journalLen()
	require.Equal(t, protocol.Reply{Code: protocol.CodeJobCancelled}, b.m.CommitFinish(b.now, o.JobID, o.AttemptID))
	b.clean()
	require.Equal(t, []ev{
		{"attempt", "committing", "cancelled", "buyer_cancelled", protocol.ActorVerify},
		{"job", "cancelling", "cancelled", "", protocol.ActorVerify},
	}, evs(b.journalSince(n)))
	require.Empty(t, b.job(o.JobID).OutputSHA256)
}

func TestCommitVerificationFailed(t *testing.T) {
	t.Parallel()
	for name, arrange := range map[string]func(c *protocol.Commit) bool{
		"outcome false": func(*protocol.Commit) bool { return false },
		// The claimed key is part of verification and needs no store.
		"foreign key": func(c *protocol.Commit) bool { c.Output.Key = protocol.OutputKey(c.JobID, c.JobID); return true },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, o := uploading(t)
			c := commitOf(o)
			outputOK := arrange(&c)
			n := b.journalLen()
			require.Equal(t, protocol.Reply{Code: protocol.CodeVerificationFailed}, b.m.Commit(b.now, devA, c, outputOK))
			b.clean()
			j := b.job(o.JobID)
			// Not retried, although the budget allows two more attempts.
			require.Equal(t, protocol.JobFailed, j.Status)
			require.Equal(t, protocol.FailVerificationFailed, j.FailureCode)
			require.Equal(t, protocol.HoldReleased, j.HoldStatus)
			require.Equal(t, ev{"job", "verifying", "failed", "verification_failed", protocol.ActorVerify},
				evs(b.journalSince(n))[3])
		})
	}
}
