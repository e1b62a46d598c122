package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server"
)

func TestCommitOK(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	offer, c := b.uploaded(t, t0)
	now := t0.Add(5 * time.Second)
	r, err := b.svc.CommitBegin(ctx, now, deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitPending}, r)
	a := b.attempt(t, offer.AttemptID)
	require.Equal(t, protocol.AttemptCommitting, a.Status)
	require.Equal(t, now.Add(ttl), a.LeaseExpiresAt, "the verification deadline")
	require.Equal(t, protocol.JobVerifying, b.job(t, offer.JobID).Status)

	ok, err := b.svc.Verify(ctx, offer.JobID, offer.AttemptID)
	require.NoError(t, err)
	require.True(t, ok)
	r, err = b.svc.CommitFinish(ctx, now.Add(time.Second), offer.JobID, offer.AttemptID, ok)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitOK}, r)

	j := b.job(t, offer.JobID)
	require.Equal(t, protocol.JobSucceeded, j.Status)
	require.Equal(t, c.Output.SHA256, j.OutputSHA256)
	require.Equal(t, offer.AttemptID, j.SucceededAttemptID)
	require.Equal(t, protocol.HoldCaptured, j.HoldStatus)
	require.Equal(t, 1, j.Webhooks)
	require.Equal(t, protocol.BuyerRow{ID: buyerID, BalanceCents: balance - price, CapturedCents: price}, b.buyer(t, buyerID))
	require.Equal(t, protocol.AttemptSucceeded, b.attempt(t, offer.AttemptID).Status)
	require.Equal(t, []string{"job ->queued  buyer", "attempt ->leased  matcher", "job queued->active  matcher",
		"attempt leased->uploading  device", "attempt uploading->committing  device", "job active->verifying  device",
		"attempt committing->succeeded  verifier", "job verifying->succeeded  verifier"}, b.journalOf(t, offer.JobID))
	require.Equal(t, 0, b.snapshot(t).Devices[0].LiveAttempts, "the slot is free once txn2 committed")

	// Commit runs the same three steps in one call.
	_, c2 := b.uploaded(t, now)
	r, err = b.svc.Commit(ctx, now, deviceID, c2)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitOK}, r)
}

func TestCommitRepeatedIsPending(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	_, c := b.uploaded(t, t0)
	r, err := b.svc.CommitBegin(ctx, t0, deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCommitPending, r.Code)
	before := b.snapshot(t)
	// A duplicated frame, even one past the first lease's expiry: the
	// attempt is committing, so the lease check does not apply.
	r, err = b.svc.CommitBegin(ctx, t0.Add(ttl/2), deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitPending}, r)
	// Nothing changes but the heartbeat: the frame passed the fence.
	for i := range before.Devices {
		if before.Devices[i].ID == deviceID {
			before.Devices[i].LastSeenAt = t0.Add(ttl / 2)
		}
	}
	require.Equal(t, before, b.snapshot(t))
}

func TestCommitConflict(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	offer, c := b.uploaded(t, t0)
	otherOffer, _ := b.uploaded(t, t0)
	before := b.snapshot(t)
	edits := map[string]func(*protocol.Commit) string{
		"foreign device": func(*protocol.Commit) string { return otherDevice },
		"wrong epoch":    func(c *protocol.Commit) string { c.LeaseEpoch = 2; return deviceID },
		"wrong token":    func(c *protocol.Commit) string { c.CommitToken += "x"; return deviceID },
		"other's token":  func(c *protocol.Commit) string { c.CommitToken = otherOffer.CommitToken; return deviceID },
		"missing job":    func(c *protocol.Commit) string { c.JobID = missingID; return deviceID },
		"other job":      func(c *protocol.Commit) string { c.JobID = otherOffer.JobID; return deviceID },
		"bad attempt id": func(c *protocol.Commit) string { c.AttemptID = "x"; return deviceID },
	}
	for name, edit := range edits {
		bad := c
		device := edit(&bad)
		r, err := b.svc.Commit(ctx, t0, device, bad)
		require.NoError(t, err)
		require.Equal(t, protocol.Reply{Code: protocol.CodeCommitConflict}, r, name)
	}
	require.Equal(t, before, b.snapshot(t), "a conflict mutates nothing")
	require.Equal(t, protocol.AttemptUploading, b.attempt(t, offer.AttemptID).Status)
}

// A token of a previous attempt of the same job gives no authority over the
// next attempt, even on the same device.
func TestCommitConflictStaleToken(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	b.createJob(t, t0, nil)
	first := b.lease(t, t0, deviceID)
	r, err := b.svc.Fail(ctx, t0, deviceID, failOf(first, protocol.FailUploadFailed))
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK, Requeued: true}, r)
	second := b.lease(t, t0, deviceID)
	require.Equal(t, first.JobID, second.JobID)
	require.Equal(t, 2, second.AttemptNumber)
	require.Equal(t, protocol.CodeProgressOK, b.progress(t, t0, deviceID, second, protocol.AttemptUploading).Code)
	out := b.put(t, second, mp4.Synthetic(mp4.SyntheticParams{}))
	stale := commitOf(second, out)
	stale.CommitToken = first.CommitToken
	r, err = b.svc.Commit(ctx, t0, deviceID, stale)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitConflict}, r)
	require.Equal(t, protocol.AttemptUploading, b.attempt(t, second.AttemptID).Status)
}

func TestCommitAttemptNotCommittable(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)
	require.Equal(t, protocol.CodeProgressOK, b.progress(t, t0, deviceID, offer, protocol.AttemptRunning).Code)
	out := b.put(t, offer, mp4.Synthetic(mp4.SyntheticParams{}))
	r, err := b.svc.Commit(ctx, t0, deviceID, commitOf(offer, out))
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: protocol.AttemptRunning}, r)

	// After success the attempt is terminal; a late duplicate is refused,
	// and so is a second transaction 2.
	_, c := b.uploaded(t, t0)
	r, err = b.svc.Commit(ctx, t0, deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCommitOK, r.Code)
	r, err = b.svc.Commit(ctx, t0, deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: protocol.AttemptSucceeded}, r)
	r, err = b.svc.CommitFinish(ctx, t0, c.JobID, c.AttemptID, true)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: protocol.AttemptSucceeded}, r)
	r, err = b.svc.CommitFinish(ctx, t0, c.JobID, missingID, true)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeAttemptNotCommittable}, r)
}

func TestCommitLeaseExpired(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	offer, c := b.uploaded(t, t0)
	before := b.snapshot(t)
	r, err := b.svc.Commit(context.Background(), t0.Add(ttl), deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeLeaseExpired}, r)
	require.Equal(t, before, b.snapshot(t))
	require.Equal(t, protocol.AttemptUploading, b.attempt(t, offer.AttemptID).Status)
}

func TestCommitJobCancelledBeforeTxn1(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	offer, c := b.uploaded(t, t0)
	r, err := b.svc.Cancel(ctx, t0, buyerID, offer.JobID)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCancelling, r.Code)
	r, err = b.svc.Commit(ctx, t0, deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeJobCancelled}, r)
	j := b.job(t, offer.JobID)
	require.Equal(t, protocol.JobCancelled, j.Status)
	require.Equal(t, protocol.HoldReleased, j.HoldStatus)
	require.Equal(t, 1, j.Webhooks)
	require.Empty(t, j.OutputSHA256)
	require.Equal(t, protocol.FailBuyerCancelled, b.attempt(t, offer.AttemptID).FailureCode)
	require.Equal(t, protocol.BuyerRow{ID: buyerID, BalanceCents: balance}, b.buyer(t, buyerID))
	journal := b.journalOf(t, offer.JobID)
	require.Equal(t, []string{"job active->cancelling  buyer", "attempt uploading->cancelled buyer_cancelled device",
		"job cancelling->cancelled  device"}, journal[len(journal)-3:])
}

func TestCommitJobCancelledBetweenTransactions(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	offer, c := b.uploaded(t, t0)
	r, err := b.svc.CommitBegin(ctx, t0, deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCommitPending, r.Code)
	r, err = b.svc.Cancel(ctx, t0, buyerID, offer.JobID)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, r, "verifying -> cancelling")
	ok, err := b.svc.Verify(ctx, offer.JobID, offer.AttemptID)
	require.NoError(t, err)
	require.True(t, ok, "the output is fine, and still loses")
	r, err = b.svc.CommitFinish(ctx, t0, offer.JobID, offer.AttemptID, ok)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeJobCancelled}, r)
	j := b.job(t, offer.JobID)
	require.Equal(t, protocol.JobCancelled, j.Status)
	require.Equal(t, protocol.HoldReleased, j.HoldStatus)
	require.Empty(t, j.SucceededAttemptID)
	journal := b.journalOf(t, offer.JobID)
	require.Equal(t, []string{"job verifying->cancelling  buyer", "attempt committing->cancelled buyer_cancelled verifier",
		"job cancelling->cancelled  verifier"}, journal[len(journal)-3:])
}

func TestCommitVerificationFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	cases := map[string]func(*bundle, protocol.Reply, *protocol.Commit){
		"wrong sha":  func(_ *bundle, _ protocol.Reply, c *protocol.Commit) { c.Output.SHA256 = inputSHA },
		"wrong size": func(_ *bundle, _ protocol.Reply, c *protocol.Commit) { c.Output.Bytes++ },
		// Malformed claims are judged by verification, not refused by the database.
		"negative size": func(_ *bundle, _ protocol.Reply, c *protocol.Commit) { c.Output.Bytes = -1 },
		"malformed sha": func(_ *bundle, _ protocol.Reply, c *protocol.Commit) { c.Output.SHA256 = "XYZ" },
		"missing object": func(b *bundle, o protocol.Reply, _ *protocol.Commit) {
			require.NoError(t, b.store.Delete(ctx, protocol.OutputKey(o.JobID, o.AttemptID)))
		},
		"invalid mp4": func(b *bundle, o protocol.Reply, c *protocol.Commit) {
			c.Output = b.put(t, o, []byte("this is not an iso-bmff file at all"))
		},
		"truncated mp4": func(b *bundle, o protocol.Reply, c *protocol.Commit) {
			c.Output = b.put(t, o, mp4.Synthetic(mp4.SyntheticParams{})[:40])
		},
		"foreign key": func(_ *bundle, _ protocol.Reply, c *protocol.Commit) { c.Output.Key = "outputs/x/y.mp4" },
	}
	for name, breakIt := range cases {
		offer, c := b.uploaded(t, t0)
		breakIt(b, offer, &c)
		r, err := b.svc.Commit(ctx, t0, deviceID, c)
		require.NoError(t, err)
		require.Equal(t, protocol.Reply{Code: protocol.CodeVerificationFailed}, r, name)
		j := b.job(t, offer.JobID)
		require.Equal(t, protocol.JobFailed, j.Status, "%s: not retried although attempts remain", name)
		require.Equal(t, protocol.FailVerificationFailed, j.FailureCode, name)
		require.Equal(t, protocol.HoldReleased, j.HoldStatus, name)
		a := b.attempt(t, offer.AttemptID)
		require.Equal(t, protocol.AttemptFailed, a.Status, name)
		require.Equal(t, protocol.FailVerificationFailed, a.FailureCode, name)
	}
	require.Equal(t, protocol.BuyerRow{ID: buyerID, BalanceCents: balance}, b.buyer(t, buyerID))
}
