package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

func TestCommitOK(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c, o := b.leased(t)
	uploading(t, c, o)
	out := b.putOutput(t, o)
	deviceclient.MustSend(t, c, deviceclient.Commit(o, out))
	require.Equal(t, &protocol.CommitOK{Type: protocol.TypeCommitOK, JobID: o.JobID, AttemptID: o.AttemptID},
		deviceclient.Expect[protocol.CommitOK](t, c))
	require.Equal(t, protocol.JobSucceeded, b.jobStatus(t, o.JobID))
	var sha string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT output_sha256 FROM jobs WHERE id = $1`, o.JobID).Scan(&sha))
	require.Equal(t, out.SHA256, sha)
	require.Equal(t, 1.0, metricValue(b.m.Commits.WithLabelValues(string(protocol.CodeCommitOK))))
}

// commitWorld is a device1 session holding an offer.
type commitWorld struct {
	b *bundle
	c *deviceclient.Client
	o *protocol.LeaseOffer
}

// commitRejection is one way a commit loses.
type commitRejection struct {
	name string
	code protocol.Code
	// act arranges the situation and returns the session and frame to send.
	act func(t *testing.T, w commitWorld) (*deviceclient.Client, *protocol.Commit)
	// unchanged says the rejected commit must not change any row.
	unchanged bool
	job       protocol.JobStatus
}

// commitRejections are the commit outcomes of SPEC section 3 other than
// success.
var commitRejections = []commitRejection{
	{"foreign device", protocol.CodeCommitConflict, func(t *testing.T, w commitWorld) (*deviceclient.Client, *protocol.Commit) {
		uploading(t, w.c, w.o)
		thief := w.b.connect(t, token2, 1, 0)
		return thief, deviceclient.Commit(w.o, w.b.putOutput(t, w.o))
	}, true, protocol.JobActive},
	{"wrong epoch", protocol.CodeCommitConflict, func(t *testing.T, w commitWorld) (*deviceclient.Client, *protocol.Commit) {
		uploading(t, w.c, w.o)
		m := deviceclient.Commit(w.o, w.b.putOutput(t, w.o))
		m.LeaseEpoch = 2
		return w.c, m
	}, true, protocol.JobActive},
	{"wrong token", protocol.CodeCommitConflict, func(t *testing.T, w commitWorld) (*deviceclient.Client, *protocol.Commit) {
		uploading(t, w.c, w.o)
		m := deviceclient.Commit(w.o, w.b.putOutput(t, w.o))
		m.CommitToken = "not-the-token"
		return w.c, m
	}, true, protocol.JobActive},
	{"not uploading", protocol.CodeAttemptNotCommittable, func(t *testing.T, w commitWorld) (*deviceclient.Client, *protocol.Commit) {
		return w.c, deviceclient.Commit(w.o, w.b.putOutput(t, w.o))
	}, true, protocol.JobActive},
	{"replay after commit_ok", protocol.CodeAttemptNotCommittable, func(t *testing.T, w commitWorld) (*deviceclient.Client, *protocol.Commit) {
		uploading(t, w.c, w.o)
		m := deviceclient.Commit(w.o, w.b.putOutput(t, w.o))
		deviceclient.MustSend(t, w.c, m)
		deviceclient.Expect[protocol.CommitOK](t, w.c)
		return w.c, m
	}, true, protocol.JobSucceeded},
	{"after expiry", protocol.CodeLeaseExpired, func(t *testing.T, w commitWorld) (*deviceclient.Client, *protocol.Commit) {
		uploading(t, w.c, w.o)
		w.b.clock.Advance(ttl)
		return w.c, deviceclient.Commit(w.o, w.b.putOutput(t, w.o))
	}, true, protocol.JobActive},
	{"after cancel", protocol.CodeJobCancelled, func(t *testing.T, w commitWorld) (*deviceclient.Client, *protocol.Commit) {
		uploading(t, w.c, w.o)
		r, err := w.b.svc.Cancel(context.Background(), w.b.now(), buyerID, w.o.JobID)
		require.NoError(t, err)
		require.Equal(t, protocol.CodeCancelling, r.Code)
		deviceclient.Expect[protocol.Cancel](t, w.c)
		return w.c, deviceclient.Commit(w.o, w.b.putOutput(t, w.o))
	}, false, protocol.JobCancelled},
	{"bad output", protocol.CodeVerificationFailed, func(t *testing.T, w commitWorld) (*deviceclient.Client, *protocol.Commit) {
		uploading(t, w.c, w.o)
		out := w.b.putOutput(t, w.o)
		out.Bytes++
		return w.c, deviceclient.Commit(w.o, out)
	}, false, protocol.JobFailed},
}

// Every commit outcome of SPEC section 3 other than success reaches the
// agent as commit_rejected with the contract's code.
func TestCommitRejections(t *testing.T) {
	t.Parallel()
	for _, tc := range commitRejections {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			c, o := b.leased(t)
			sender, m := tc.act(t, commitWorld{b, c, o})
			before := b.snapshot(t)
			deviceclient.MustSend(t, sender, m)
			got := deviceclient.Expect[protocol.CommitRejected](t, sender)
			require.Equal(t, tc.code, got.Code, got.Message)
			require.Equal(t, o.JobID, got.JobID)
			require.Equal(t, o.AttemptID, got.AttemptID)
			require.NotEmpty(t, got.Message)
			if tc.unchanged {
				requireUnchanged(t, before, b.snapshot(t))
			}
			require.Equal(t, tc.job, b.jobStatus(t, o.JobID))
			require.Equal(t, 1.0, metricValue(b.m.Commits.WithLabelValues(string(tc.code))))
		})
	}
}

// The commit result is on the wire before the slot it frees is offered
// again, and the next offer comes only once the job is decided.
func TestCommitResultPrecedesTheNextOffer(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	first := b.createJob(t, false)
	b.clock.Advance(time.Millisecond)
	second := b.createJob(t, false)
	c := b.connect(t, token1, 1, 1)
	o := deviceclient.Expect[protocol.LeaseOffer](t, c)
	require.Equal(t, first, o.JobID)
	uploading(t, c, o)
	deviceclient.MustSend(t, c, deviceclient.Commit(o, b.putOutput(t, o)))
	ok := deviceclient.Expect[protocol.CommitOK](t, c)
	require.Equal(t, first, ok.JobID)
	next := deviceclient.Expect[protocol.LeaseOffer](t, c)
	require.Equal(t, second, next.JobID)
	require.Equal(t, protocol.JobSucceeded, b.jobStatus(t, first))
	requireLiveAttempts(t, b, device1, 1)
}

// A verification that fails ends the attempt too: its slot is offered again.
func TestVerificationFailureFreesTheSlot(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c, o := b.leased(t)
	second := b.createJob(t, false)
	uploading(t, c, o)
	out := b.putOutput(t, o)
	out.SHA256 = inputSHA
	deviceclient.MustSend(t, c, deviceclient.Commit(o, out))
	require.Equal(t, protocol.CodeVerificationFailed, deviceclient.Expect[protocol.CommitRejected](t, c).Code)
	require.Equal(t, second, deviceclient.Expect[protocol.LeaseOffer](t, c).JobID)
}

func TestFailOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		code     protocol.FailureCode
		token    string
		reply    protocol.Code
		requeued bool
		job      protocol.JobStatus
	}{
		{"retryable requeues", protocol.FailDownloadFailed, "", protocol.CodeFailOK, true, protocol.JobActive},
		{"not retryable fails the job", protocol.FailRunnerFailed, "", protocol.CodeFailOK, false, protocol.JobFailed},
		{"wrong token", protocol.FailRunnerFailed, "not-the-token", protocol.CodeFailConflict, false, protocol.JobActive},
		{"unknown code", "exploded", "", protocol.CodeBadFailureCode, false, protocol.JobActive},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			c, o := b.leased(t)
			m := deviceclient.Fail(o, tc.code)
			if tc.token != "" {
				m.CommitToken = tc.token
			}
			before := b.snapshot(t)
			deviceclient.MustSend(t, c, m)
			if tc.reply == protocol.CodeFailOK {
				got := deviceclient.Expect[protocol.FailOK](t, c)
				require.Equal(t, &protocol.FailOK{Type: protocol.TypeFailOK, JobID: o.JobID, AttemptID: o.AttemptID,
					Requeued: tc.requeued}, got)
			} else {
				got := deviceclient.Expect[protocol.FailRejected](t, c)
				require.Equal(t, &protocol.FailRejected{Type: protocol.TypeFailRejected, JobID: o.JobID,
					AttemptID: o.AttemptID, Code: tc.reply}, got)
				requireUnchanged(t, before, b.snapshot(t))
			}
			if tc.requeued {
				// The requeued job comes back into the freed slot as attempt 2.
				again := deviceclient.Expect[protocol.LeaseOffer](t, c)
				require.Equal(t, o.JobID, again.JobID)
				require.Equal(t, 2, again.AttemptNumber)
				require.NotEqual(t, o.CommitToken, again.CommitToken)
			}
			require.Equal(t, tc.job, b.jobStatus(t, o.JobID))
			require.Equal(t, 1.0, metricValue(b.m.Fails.WithLabelValues(failLabel(tc.code), string(tc.reply))))
		})
	}
}

// Frames about one attempt are answered in the order they came, even when
// the first is a commit still being verified: a duplicated commit and a
// stale progress behind it see the decided attempt, as the model would
// answer them.
func TestRepliesAboutOneAttemptKeepFrameOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c, o := b.leased(t)
	uploading(t, c, o)
	m := deviceclient.Commit(o, b.putOutput(t, o))
	opened, release := b.store.holdReads()
	deviceclient.MustSend(t, c, m)
	<-opened
	deviceclient.MustSend(t, c, m)
	deviceclient.MustSend(t, c, deviceclient.Progress(o, protocol.AttemptUploading))
	// Both are queued behind the commit (three workers busy) before
	// verification may end, so the test takes the queueing branch.
	require.Eventually(t, func() bool { return busyWorkers(b, device1) == 3 }, deviceclient.Timeout, tick)
	release()
	deviceclient.Expect[protocol.CommitOK](t, c)
	dup := deviceclient.Expect[protocol.CommitRejected](t, c)
	require.Equal(t, protocol.CodeAttemptNotCommittable, dup.Code)
	require.Contains(t, dup.Message, "succeeded")
	require.Equal(t, protocol.ReasonAttemptTerminal, deviceclient.Expect[protocol.LeaseConflict](t, c).Reason)
}

// busyWorkers counts the frame workers of the device's session.
func busyWorkers(b *bundle, deviceID string) int {
	n := 0
	for _, s := range b.gw.sessionsOf(deviceID) {
		n += len(s.workers)
	}
	return n
}

// A fail no_capacity is a device saying it has no room, and a fail
// provider_offline a device saying it is stopping: the slot either frees is
// not offered again until the device reports free slots, or a device on a
// full disk, or an agent failing its attempts on a second SIGTERM, would be
// handed the requeued job straight back and burn its attempt budget in
// milliseconds (seen in `rendermac fleet`, and issue 48's 7 ms).
func TestFailNoCapacityOrOfflineOffersNothingUntilASlotsReport(t *testing.T) {
	t.Parallel()
	for _, code := range []protocol.FailureCode{protocol.FailNoCapacity, protocol.FailProviderOffline} {
		t.Run(string(code), func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			c, o := b.leased(t)
			deviceclient.MustSend(t, c, deviceclient.Fail(o, code))
			require.True(t, deviceclient.Expect[protocol.FailOK](t, c).Requeued)
			deviceclient.ExpectNone(t, c, 500*time.Millisecond, "offered after a fail "+string(code)+" without a slots report")
			deviceclient.MustSend(t, c, &protocol.Slots{Type: protocol.TypeSlots, SlotsFree: 1})
			again := deviceclient.Expect[protocol.LeaseOffer](t, c)
			require.Equal(t, o.JobID, again.JobID)
			require.Equal(t, 2, again.AttemptNumber)
		})
	}
}
