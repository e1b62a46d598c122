package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

// withdrawalOf is the Withdraw a gateway makes of offer o.
func withdrawalOf(o protocol.Reply) protocol.Withdrawal {
	return protocol.Withdrawal{JobID: o.JobID, AttemptID: o.AttemptID, LeaseEpoch: o.LeaseEpoch, CommitToken: o.CommitToken}
}

func (b *bundle) withdraw(dev string, w protocol.Withdrawal) protocol.Reply {
	b.t.Helper()
	r, err := b.tg.Withdraw(b.ctx, b.now, dev, w)
	requireNoError(b.t, err)
	return normal(r)
}

var withdrawCases = []testCase{
	{name: "WithdrawSpendsNoBudget", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		req := request(buyerRich, svcSynthetic)
		req.MaxAttempts = 1
		id := b.create(req)
		o := b.lease(devA)
		seen := b.device(devA).LastSeenAt
		b.tick(time.Second)
		n := b.journalLen()
		require.Equal(t, protocol.Reply{Code: protocol.CodeWithdrawn, Requeued: true}, b.withdraw(devA, withdrawalOf(o)))
		b.clean()
		require.Equal(t, []string{"attempt leased->failed offer_withdrawn matcher", "job active->queued  matcher"},
			lines(b.journalSince(n)))
		a := b.attempt(o.AttemptID)
		require.Equal(t, protocol.AttemptFailed, a.Status)
		require.Equal(t, protocol.FailOfferWithdrawn, a.FailureCode)
		j := b.job(id)
		require.Equal(t, protocol.JobQueued, j.Status)
		require.Equal(t, 1, j.AttemptCount)
		require.Equal(t, 1, j.WithdrawnCount)
		require.Equal(t, protocol.HoldHeld, j.HoldStatus)
		require.Equal(t, 0, b.device(devA).LiveAttempts, "the slot is free again")
		require.Equal(t, seen, b.device(devA).LastSeenAt, "the device said nothing: no heartbeat")

		// max_attempts 1, and the one attempt the job spends is the next.
		again := b.lease(devB)
		require.Equal(t, 2, again.AttemptNumber)
		require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK}, b.fail(devB, failOf(again, protocol.FailDownloadFailed)))
		b.clean()
		j = b.job(id)
		require.Equal(t, protocol.JobFailed, j.Status, "one attempt spent of one: no requeue")
		require.Equal(t, protocol.FailDownloadFailed, j.FailureCode)
	}},
	{name: "WithdrawnBudgetAllowsARetry", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		req := request(buyerRich, svcSynthetic)
		req.MaxAttempts = 2
		id := b.create(req)
		require.Equal(t, protocol.CodeWithdrawn, b.withdraw(devA, withdrawalOf(b.lease(devA))).Code)
		second := b.lease(devA)
		require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK, Requeued: true},
			b.fail(devA, failOf(second, protocol.FailUploadFailed)), "attempt 2 is the first spent: one retry left")
		third := b.lease(devA)
		require.Equal(t, 3, third.AttemptNumber)
		b.now = third.LeaseExpiresAt
		res := b.sweep()
		require.Equal(t, 1, res.Lost)
		require.Equal(t, 0, res.Requeued, "attempt 3 is the second spent of two")
		require.Equal(t, protocol.JobFailed, b.job(id).Status)
	}},
	{name: "WithdrawWhileCancellingOrPastDeadline", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		cancelled := b.create(request(buyerRich, svcSynthetic))
		o := b.lease(devA)
		require.Equal(t, protocol.CodeCancelling, b.cancel(buyerRich, cancelled).Code)
		n := b.journalLen()
		require.Equal(t, protocol.Reply{Code: protocol.CodeWithdrawn}, b.withdraw(devA, withdrawalOf(o)))
		b.clean()
		require.Equal(t, []string{"attempt leased->failed offer_withdrawn matcher", "job cancelling->cancelled  matcher"},
			lines(b.journalSince(n)))

		req := request(buyerRich, svcSynthetic)
		req.AdmissionWindow = time.Minute
		late := b.create(req)
		o = b.lease(devA)
		b.tick(time.Minute)
		require.Equal(t, protocol.Reply{Code: protocol.CodeWithdrawn}, b.withdraw(devA, withdrawalOf(o)))
		b.clean()
		j := b.job(late)
		require.Equal(t, protocol.JobFailed, j.Status, "no requeue past the deadline")
		require.Equal(t, protocol.FailAdmissionExpired, j.FailureCode)
		require.Equal(t, 1, j.WithdrawnCount)
	}},
	{name: "WithdrawConflict", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		b.create(request(buyerRich, svcSynthetic))
		o := b.lease(devA)
		edits := map[string]func(*protocol.Withdrawal) string{
			"foreign device":  func(*protocol.Withdrawal) string { return devB },
			"wrong epoch":     func(w *protocol.Withdrawal) string { w.LeaseEpoch = 2; return devA },
			"wrong token":     func(w *protocol.Withdrawal) string { w.CommitToken = "not-the-token"; return devA },
			"unknown attempt": func(w *protocol.Withdrawal) string { w.AttemptID = missingID; return devA },
			"missing job":     func(w *protocol.Withdrawal) string { w.JobID = missingID; return devA },
		}
		for name, edit := range edits {
			w := withdrawalOf(o)
			dev := edit(&w)
			b.unchanged(func() {
				require.Equal(t, protocol.Reply{Code: protocol.CodeWithdrawConflict}, b.withdraw(dev, w), name)
			})
		}
		// The device acted on the offer: it had it, so it keeps it.
		b.phase(devA, o, protocol.AttemptDownloading)
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeWithdrawConflict}, b.withdraw(devA, withdrawalOf(o)))
		})
		// An attempt that is over is not withdrawn either.
		b.create(request(buyerRich, svcSynthetic))
		done := b.lease(devB)
		require.Equal(t, protocol.CodeFailOK, b.fail(devB, failOf(done, protocol.FailRunnerFailed)).Code)
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeWithdrawConflict}, b.withdraw(devB, withdrawalOf(done)))
		})
	}},
}
