package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

func TestFailRequeued(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := b.create(request(buyerRich, svcSynthetic))
	o := b.lease(devA)
	b.tick(time.Second)
	n := b.journalLen()
	require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK, Requeued: true},
		b.m.Fail(b.now, devA, failOf(o, protocol.FailUploadFailed)))
	b.clean()
	require.Equal(t, []ev{
		{"attempt", "leased", "failed", "upload_failed", protocol.ActorDevice},
		{"job", "active", "queued", "", protocol.ActorDevice},
	}, evs(b.journalSince(n)))
	require.Equal(t, protocol.FailUploadFailed, b.attemptRow(o.AttemptID).FailureCode)
	j := b.job(id)
	require.Equal(t, protocol.JobQueued, j.Status)
	require.Empty(t, j.FailureCode)
	require.Equal(t, protocol.HoldHeld, j.HoldStatus)
	require.Equal(t, 0, b.deviceRow(devA).LiveAttempts) // the slot is free again

	again := b.lease(devA)
	require.Equal(t, 2, again.AttemptNumber)
	require.NotEqual(t, o.AttemptID, again.AttemptID)
	require.NotEqual(t, o.CommitToken, again.CommitToken)
}

func TestFailNotRequeued(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		req     func(*protocol.CreateJobRequest)
		code    protocol.FailureCode
		advance time.Duration
	}{
		{"budget", func(r *protocol.CreateJobRequest) { r.MaxAttempts = 1 }, protocol.FailInternalError, 0},
		// An expired but unswept lease may still fail: the agent gives up.
		{"deadline", func(r *protocol.CreateJobRequest) { r.AdmissionWindow = time.Minute }, protocol.FailNoCapacity, time.Minute},
		{"non-retryable", func(*protocol.CreateJobRequest) {}, protocol.FailRunnerFailed, 0},
		{"non-retryable agent verdict", func(*protocol.CreateJobRequest) {}, protocol.FailCommitConflict, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			req := request(buyerRich, svcSynthetic)
			tc.req(&req)
			id := b.create(req)
			o := b.lease(devA)
			b.tick(tc.advance)
			require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK}, b.m.Fail(b.now, devA, failOf(o, tc.code)))
			b.clean()
			j := b.job(id)
			require.Equal(t, protocol.JobFailed, j.Status)
			require.Equal(t, tc.code, j.FailureCode)
			require.Equal(t, protocol.HoldReleased, j.HoldStatus)
			require.Equal(t, 1, j.Webhooks)
		})
	}
}

func TestFailOnCancellingJob(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := b.create(request(buyerRich, svcSynthetic))
	o := b.lease(devA)
	require.Equal(t, protocol.CodeCancelling, b.m.Cancel(b.now, buyerRich, id).Code)
	n := b.journalLen()
	require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK},
		b.m.Fail(b.now, devA, failOf(o, protocol.FailBuyerCancelled)))
	b.clean()
	require.Equal(t, []ev{
		{"attempt", "leased", "failed", "buyer_cancelled", protocol.ActorDevice},
		{"job", "cancelling", "cancelled", "", protocol.ActorDevice},
	}, evs(b.journalSince(n)))
}

func TestFailConflict(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		dev     string
		mut     func(*protocol.Fail)
		arrange func(*testBundle, protocol.Reply)
	}{
		{"foreign device", devB, func(*protocol.Fail) {}, nil},
		{"wrong epoch", devA, func(f *protocol.Fail) { f.LeaseEpoch = 7 }, nil},
		{"wrong token", devA, func(f *protocol.Fail) { f.CommitToken = "not-the-token" }, nil},
		{"unknown attempt", devA, func(f *protocol.Fail) { f.AttemptID = "00000000-0000-4000-8000-000000000000" }, nil},
		{"other job", devA, func(f *protocol.Fail) { f.JobID = "00000000-0000-4000-8000-000000000000" }, nil},
		{"committing", devA, func(*protocol.Fail) {}, func(b *testBundle, o protocol.Reply) {
			b.upload(devA, o)
			require.Equal(b.t, protocol.CodeCommitPending, b.m.CommitBegin(b.now, devA, commitOf(o), true).Code)
		}},
		{"terminal", devA, func(*protocol.Fail) {}, func(b *testBundle, o protocol.Reply) {
			require.Equal(b.t, protocol.CodeFailOK, b.m.Fail(b.now, devA, failOf(o, protocol.FailRunnerFailed)).Code)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			b.create(request(buyerRich, svcSynthetic))
			o := b.lease(devA)
			if tc.arrange != nil {
				tc.arrange(b, o)
			}
			f := failOf(o, protocol.FailInternalError)
			tc.mut(&f)
			b.unchanged(func() {
				require.Equal(t, protocol.Reply{Code: protocol.CodeFailConflict}, b.m.Fail(b.now, tc.dev, f))
			})
		})
	}
}

func TestFailBadFailureCode(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.create(request(buyerRich, svcSynthetic))
	o := b.lease(devA)
	for _, code := range []protocol.FailureCode{"", "gave_up", protocol.FailAdmissionExpired} {
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeBadFailureCode}, b.m.Fail(b.now, devA, failOf(o, code)))
			// The code is checked before the identity.
			stranger := failOf(o, code)
			stranger.AttemptID = "00000000-0000-4000-8000-000000000000"
			require.Equal(t, protocol.Reply{Code: protocol.CodeBadFailureCode}, b.m.Fail(b.now, devB, stranger))
		})
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	queued := b.create(request(buyerRich, svcSynthetic))
	n := b.journalLen()
	require.Equal(t, protocol.Reply{Code: protocol.CodeCancelled}, b.m.Cancel(b.now, buyerRich, queued))
	b.clean()
	require.Equal(t, []ev{{"job", "queued", "cancelled", "", protocol.ActorBuyer}}, evs(b.journalSince(n)))
	j := b.job(queued)
	require.Equal(t, protocol.HoldReleased, j.HoldStatus)
	require.Equal(t, 1, j.Webhooks)
	require.Equal(t, protocol.BuyerRow{ID: buyerRich, BalanceCents: 1000}, b.buyerRow(buyerRich))

	// Terminal jobs answer job_terminal and stay as they are.
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeJobTerminal}, b.m.Cancel(b.now, buyerRich, queued))
	})

	active := b.create(request(buyerRich, svcSynthetic))
	o := b.lease(devA)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, b.m.Cancel(b.now, buyerRich, active))
	b.clean()
	// The live attempt is left as it is: it only lost its authority.
	require.Equal(t, protocol.AttemptLeased, b.attemptRow(o.AttemptID).Status)
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, b.m.Cancel(b.now, buyerRich, active))
	})

	verifying := b.create(request(buyerRich, svcSynthetic))
	v := b.lease(devB)
	b.upload(devB, v)
	require.Equal(t, protocol.CodeCommitPending, b.m.CommitBegin(b.now, devB, commitOf(v), true).Code)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCancelling}, b.m.Cancel(b.now, buyerRich, verifying))
	b.clean()
}

func TestCancelNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := b.create(request(buyerRich, svcSynthetic))
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeNotFound}, b.m.Cancel(b.now, buyerPoor, id))
		require.Equal(t, protocol.Reply{Code: protocol.CodeNotFound}, b.m.Cancel(b.now, buyerRich, "no-such-job"))
	})
}
