package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

var failCases = []testCase{
	{name: "FailRequeued", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		id := b.create(request(buyerRich, svcSynthetic))
		o := b.lease(devA)
		// Past the lease's expiry but not yet swept: failing is still allowed.
		b.now = o.LeaseExpiresAt
		n := b.journalLen()
		require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK, Requeued: true},
			b.fail(devA, failOf(o, protocol.FailDownloadFailed)))
		b.clean()
		require.Equal(t, []string{"attempt leased->failed download_failed device", "job active->queued  device"},
			lines(b.journalSince(n)))
		a := b.attempt(o.AttemptID)
		require.Equal(t, protocol.AttemptFailed, a.Status)
		require.Equal(t, protocol.FailDownloadFailed, a.FailureCode)
		j := b.job(id)
		require.Equal(t, protocol.JobQueued, j.Status)
		require.Empty(t, j.FailureCode)
		require.Equal(t, protocol.HoldHeld, j.HoldStatus)
		require.Zero(t, j.Webhooks)
		require.Equal(t, 0, b.device(devA).LiveAttempts, "the slot is free again")

		again := b.lease(devA)
		require.Equal(t, 2, again.AttemptNumber)
		require.NotEqual(t, o.AttemptID, again.AttemptID)
		require.NotEqual(t, o.CommitToken, again.CommitToken)
	}},
	{name: "FailNotRequeued", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		cases := []struct {
			name    string
			edit    func(*protocol.CreateJobRequest)
			code    protocol.FailureCode
			advance time.Duration
		}{
			{"budget", func(r *protocol.CreateJobRequest) { r.MaxAttempts = 1 }, protocol.FailInternalError, 0},
			{"budget, no capacity", func(r *protocol.CreateJobRequest) { r.MaxAttempts = 1 }, protocol.FailNoCapacity, 0},
			// An expired but unswept lease may still fail: the agent gives up.
			{"deadline", func(r *protocol.CreateJobRequest) { r.AdmissionWindow = time.Minute }, protocol.FailNoCapacity, time.Minute},
			{"deadline passed", func(r *protocol.CreateJobRequest) { r.AdmissionWindow = time.Second }, protocol.FailInternalError, time.Second},
			{"non-retryable", func(*protocol.CreateJobRequest) {}, protocol.FailRunnerFailed, 0},
			{"non-retryable agent verdict", func(*protocol.CreateJobRequest) {}, protocol.FailCommitConflict, 0},
		}
		for _, c := range cases {
			req := request(buyerRich, svcSynthetic)
			c.edit(&req)
			id := b.create(req)
			o := b.lease(devA)
			b.tick(c.advance)
			require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK}, b.fail(devA, failOf(o, c.code)), c.name)
			b.clean()
			j := b.job(id)
			require.Equal(t, protocol.JobFailed, j.Status, c.name)
			require.Equal(t, c.code, j.FailureCode, c.name)
			require.Equal(t, protocol.HoldReleased, j.HoldStatus, c.name)
			require.Equal(t, 1, j.Webhooks, c.name)
		}
	}},
	{name: "FailWhileCancelling", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		for _, code := range []protocol.FailureCode{protocol.FailBuyerCancelled, protocol.FailNoCapacity} {
			t.Run(string(code), func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				id := b.create(request(buyerRich, svcSynthetic))
				o := b.lease(devA)
				require.Equal(t, protocol.CodeCancelling, b.cancel(buyerRich, id).Code)
				n := b.journalLen()
				require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK}, b.fail(devA, failOf(o, code)))
				b.clean()
				require.Equal(t, []string{"attempt leased->failed " + string(code) + " device", "job cancelling->cancelled  device"},
					lines(b.journalSince(n)))
				j := b.job(id)
				require.Equal(t, protocol.JobCancelled, j.Status)
				require.Empty(t, j.FailureCode)
			})
		}
	}},
	{name: "FailConflict", run: failConflict},
	{name: "FailBadFailureCode", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		b.create(request(buyerRich, svcSynthetic))
		o := b.lease(devA)
		codes := []protocol.FailureCode{"gave_up", "exploded", protocol.FailAdmissionExpired}
		if b.opts.MalformedFrames {
			codes = append(codes, "")
		}
		for _, code := range codes {
			b.unchanged(func() {
				require.Equal(t, protocol.Reply{Code: protocol.CodeBadFailureCode}, b.fail(devA, failOf(o, code)), code)
				// The code is checked before the identity: even a foreign
				// device gets bad_failure_code.
				require.Equal(t, protocol.Reply{Code: protocol.CodeBadFailureCode}, b.fail(devB, failOf(o, code)), code)
				stranger := failOf(o, code)
				stranger.AttemptID = missingID
				require.Equal(t, protocol.Reply{Code: protocol.CodeBadFailureCode}, b.fail(devB, stranger), code)
			})
		}
		require.Equal(t, protocol.AttemptLeased, b.attempt(o.AttemptID).Status)
	}},
}

func failConflict(t *testing.T, setup func(*testing.T) *bundle) {
	b := setup(t)
	o := b.uploading(devA)
	edits := map[string]func(*protocol.Fail) string{
		"foreign device":  func(*protocol.Fail) string { return devB },
		"wrong epoch":     func(f *protocol.Fail) string { f.LeaseEpoch = 7; return devA },
		"wrong token":     func(f *protocol.Fail) string { f.CommitToken = "not-the-token"; return devA },
		"unknown attempt": func(f *protocol.Fail) string { f.AttemptID = missingID; return devA },
		"missing job":     func(f *protocol.Fail) string { f.JobID = missingID; return devA },
	}
	for name, edit := range edits {
		f := failOf(o, protocol.FailUploadFailed)
		dev := edit(&f)
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeFailConflict}, b.fail(dev, f), name)
		})
	}

	// Not in a lease phase: a committing attempt can no longer fail.
	require.Equal(t, protocol.CodeCommitPending, b.commitBegin(devA, b.commitOf(o)).Code)
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeFailConflict}, b.fail(devA, failOf(o, protocol.FailUploadFailed)))
	})
	require.Equal(t, protocol.AttemptCommitting, b.attempt(o.AttemptID).Status)

	// Nor can a terminal one.
	b.create(request(buyerRich, svcSynthetic))
	done := b.lease(devA)
	require.Equal(t, protocol.CodeFailOK, b.fail(devA, failOf(done, protocol.FailRunnerFailed)).Code)
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeFailConflict}, b.fail(devA, failOf(done, protocol.FailInternalError)))
	})
}

var cancelCases = []testCase{
	{name: "Cancel", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		queued := b.create(request(buyerRich, svcSynthetic))
		n := b.journalLen()
		require.Equal(t, protocol.Reply{Code: protocol.CodeCancelled}, b.cancel(buyerRich, queued))
		b.clean()
		require.Equal(t, []string{"job queued->cancelled  buyer"}, lines(b.journalSince(n)))
		require.Equal(t, []string{"job ->queued  buyer", "job queued->cancelled  buyer"}, b.journalOf(queued))
		j := b.job(queued)
		require.Equal(t, protocol.JobCancelled, j.Status)
		require.Equal(t, protocol.HoldReleased, j.HoldStatus)
		require.Equal(t, 1, j.Webhooks)
		require.Equal(t, protocol.BuyerRow{ID: buyerRich, BalanceCents: balanceOf(buyerRich)}, b.buyer(buyerRich))

		// Terminal jobs answer job_terminal and stay as they are.
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeJobTerminal}, b.cancel(buyerRich, queued))
		})

		active := b.create(request(buyerRich, svcSynthetic))
		o := b.lease(devA)
		require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, b.cancel(buyerRich, active))
		b.clean()
		// The live attempt is left as it is: it only lost its authority.
		require.Equal(t, protocol.AttemptLeased, b.attempt(o.AttemptID).Status)
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, b.cancel(buyerRich, active), "cancelling is idempotent")
		})

		verifying := b.uploading(devB)
		require.Equal(t, protocol.CodeCommitPending, b.commitBegin(devB, b.commitOf(verifying)).Code)
		require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, b.cancel(buyerRich, verifying.JobID))
		b.clean()

		succeeded := b.uploading(devA)
		require.Equal(t, protocol.CodeCommitOK, b.commit(devA, b.commitOf(succeeded)).Code)
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeJobTerminal}, b.cancel(buyerRich, succeeded.JobID))
		})
	}},
	{name: "CancelNotFound", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		id := b.create(request(buyerRich, svcSynthetic))
		jobs := map[string][2]string{
			"other buyer": {buyerPoor, id},
			"missing job": {buyerRich, missingID},
		}
		if b.opts.Strangers {
			jobs["bad id"] = [2]string{buyerRich, "no-such-job"}
		}
		for name, c := range jobs {
			b.unchanged(func() {
				require.Equal(t, protocol.Reply{Code: protocol.CodeNotFound}, b.cancel(c[0], c[1]), name)
			})
		}
		require.Equal(t, protocol.JobQueued, b.job(id).Status)
	}},
}
