package controlplane_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/faultpoint"
)

const listeningMsg = `msg="listening for notifications"`

// Two server processes share one database. The device's session is on B;
// the buyer cancels through A. The cancel reaches the device on B through
// Postgres LISTEN/NOTIFY (SPEC section 5): both listeners were subscribed,
// and the device welcomed, before the job even existed, so neither the
// subscribe-time nor the hello-time reconciliation can be what delivers it.
func TestCancelReachesTheDeviceThroughAnotherServer(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.start(t, "A", "127.0.0.1:0", "")
	b := w.start(t, "B", "127.0.0.1:0", "")
	waitLog(t, a, listeningMsg)
	waitLog(t, b, listeningMsg)
	d := w.pair(t, a)
	c := dial(t, b, d, 1)

	jobID := w.createJob(t, a)
	o := deviceclient.Expect[protocol.LeaseOffer](t, c) // A's job, offered by B
	require.Equal(t, jobID, o.JobID)
	deviceclient.MustSend(t, c, deviceclient.Progress(o, protocol.AttemptRunning))
	deviceclient.Expect[protocol.ProgressOK](t, c)

	var job buyer.JobDetail
	w.call(t, http.MethodPost, a.base+"/v1/jobs/"+jobID+"/cancel", w.apiKey, nil, http.StatusAccepted, &job)
	require.Equal(t, protocol.JobCancelling, job.Status)
	cancel := deviceclient.Expect[protocol.Cancel](t, c)
	require.Equal(t, protocol.Cancel{Type: protocol.TypeCancel, JobID: jobID, AttemptID: o.AttemptID}, *cancel)
	waitLog(t, b, `msg="cancel sent"`)
	require.NotContains(t, a.logs.String(), `msg="cancel sent"`, "A holds no session of the device")
	require.Equal(t, 1, strings.Count(b.logs.String(), listeningMsg), "B's listener must not have resubscribed")

	// The attempt has lost its authority; the agent gives it up and the job
	// ends cancelled, once.
	deviceclient.MustSend(t, c, deviceclient.Progress(o, protocol.AttemptUploading))
	conflict := deviceclient.Expect[protocol.LeaseConflict](t, c)
	require.Equal(t, protocol.ReasonJobCancelling, conflict.Reason)
	deviceclient.MustSend(t, c, deviceclient.Fail(o, protocol.FailBuyerCancelled))
	failOK := deviceclient.Expect[protocol.FailOK](t, c)
	require.False(t, failOK.Requeued)
	require.Equal(t, protocol.JobCancelled, w.job(t, a, jobID).Status)
	w.requireState(t, jobID, o.AttemptID, protocol.JobCancelled, protocol.AttemptFailed, "released", 1)
	w.requireBalance(t, false)
	w.requireNoViolations(t)
}

// With one slot and two queued jobs, the device hears the first commit's
// result before the freed slot is offered again (SPEC section 5: order on
// the wire). With the release held at gateway.before_slot_release, the
// result still arrives and no second offer follows: the offer waits for
// the release, not for anything else.
func TestCommitResultBeforeTheSlotIsOfferedAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, faults string
	}{
		{name: "released"},
		{name: "release_blocked", faults: faultpoint.GatewayBeforeSlotRelease + "=block"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			p := w.start(t, "A", "127.0.0.1:0", tc.faults)
			d := w.pair(t, p)
			first := w.createJob(t, p)
			second := w.createJob(t, p)
			c := dial(t, p, d, 1)

			o := deviceclient.Expect[protocol.LeaseOffer](t, c)
			require.Equal(t, first, o.JobID, "the oldest job first")
			// Strict frame order from here: an early second offer fails an Expect.
			deviceclient.MustSend(t, c, deviceclient.Progress(o, protocol.AttemptUploading))
			deviceclient.Expect[protocol.ProgressOK](t, c)
			content := mp4.Synthetic(mp4.SyntheticParams{Seed: o.AttemptID})
			w.upload(t, o, content)
			sum := sha256.Sum256(content)
			deviceclient.MustSend(t, c, deviceclient.Commit(o, protocol.Output{Key: o.Output.Key, Bytes: int64(len(content)),
				SHA256: hex.EncodeToString(sum[:])}))
			ok := deviceclient.Expect[protocol.CommitOK](t, c)
			require.Equal(t, protocol.CommitOK{Type: protocol.TypeCommitOK, JobID: first, AttemptID: o.AttemptID}, *ok)
			require.Equal(t, protocol.JobSucceeded, w.job(t, p, first).Status)

			if tc.faults == "" {
				next := deviceclient.Expect[protocol.LeaseOffer](t, c)
				require.Equal(t, second, next.JobID)
				require.Equal(t, 1, next.AttemptNumber)
			} else {
				waitLog(t, p, "faultpoint "+faultpoint.GatewayBeforeSlotRelease+": block")
				// Longer than the gateway's 2s poll, which wakes idle sessions.
				ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
				defer cancel()
				msg, err := c.Next(ctx)
				require.ErrorIs(t, err, context.DeadlineExceeded, "frame while the slot release is held: %T %+v", msg, msg)
				require.Equal(t, protocol.JobQueued, w.job(t, p, second).Status)
			}
			w.requireNoViolations(t)
		})
	}
}
