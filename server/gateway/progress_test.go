package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

// leased is a device1 session with one slot holding the offer of a fresh job.
func (b *bundle) leased(t *testing.T) (*deviceclient.Client, *protocol.LeaseOffer) {
	t.Helper()
	b.createJob(t, false)
	c := b.connect(t, token1, 1, 1)
	return c, deviceclient.Expect[protocol.LeaseOffer](t, c)
}

func TestProgressRenewsTheLease(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c, o := b.leased(t)
	b.clock.Advance(5 * time.Second)
	deviceclient.MustSend(t, c, deviceclient.Progress(o, protocol.AttemptDownloading))
	ok := deviceclient.Expect[protocol.ProgressOK](t, c)
	require.Equal(t, &protocol.ProgressOK{Type: protocol.TypeProgressOK, JobID: o.JobID, AttemptID: o.AttemptID,
		LeaseExpiresAt: t0.Add(5*time.Second + ttl)}, ok)
	var status protocol.AttemptStatus
	var seen time.Time
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT a.status, d.last_seen_at FROM job_attempts a
		JOIN devices d ON d.id = a.device_id WHERE a.id = $1`, o.AttemptID).Scan(&status, &seen))
	require.Equal(t, protocol.AttemptDownloading, status)
	require.Equal(t, t0.Add(5*time.Second), seen.UTC(), "progress heartbeats the device")
}

// Every lease_conflict reason reaches the agent, with the frame's ids, and
// changes nothing.
func TestProgressConflicts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		reason protocol.ConflictReason
		// arrange prepares the situation and returns the progress to send.
		arrange func(t *testing.T, b *bundle, c *deviceclient.Client, o *protocol.LeaseOffer) *protocol.Progress
	}{
		{protocol.ReasonIdentityMismatch, func(t *testing.T, b *bundle, c *deviceclient.Client, o *protocol.LeaseOffer) *protocol.Progress {
			p := deviceclient.Progress(o, protocol.AttemptRunning)
			p.LeaseEpoch = 2
			return p
		}},
		{protocol.ReasonPhaseRegression, func(t *testing.T, b *bundle, c *deviceclient.Client, o *protocol.LeaseOffer) *protocol.Progress {
			uploading(t, c, o)
			return deviceclient.Progress(o, protocol.AttemptRunning)
		}},
		{protocol.ReasonAttemptTerminal, func(t *testing.T, b *bundle, c *deviceclient.Client, o *protocol.LeaseOffer) *protocol.Progress {
			uploading(t, c, o)
			deviceclient.MustSend(t, c, deviceclient.Commit(o, b.putOutput(t, o)))
			deviceclient.Expect[protocol.CommitOK](t, c)
			return deviceclient.Progress(o, protocol.AttemptUploading)
		}},
		{protocol.ReasonJobCancelling, func(t *testing.T, b *bundle, c *deviceclient.Client, o *protocol.LeaseOffer) *protocol.Progress {
			r, err := b.svc.Cancel(context.Background(), b.now(), buyerID, o.JobID)
			require.NoError(t, err)
			require.Equal(t, protocol.CodeCancelling, r.Code)
			deviceclient.Expect[protocol.Cancel](t, c)
			return deviceclient.Progress(o, protocol.AttemptRunning)
		}},
		{protocol.ReasonLeaseExpired, func(t *testing.T, b *bundle, c *deviceclient.Client, o *protocol.LeaseOffer) *protocol.Progress {
			b.clock.Advance(ttl)
			return deviceclient.Progress(o, protocol.AttemptRunning)
		}},
	}
	for _, tc := range cases {
		t.Run(string(tc.reason), func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			c, o := b.leased(t)
			p := tc.arrange(t, b, c, o)
			before := b.snapshot(t)
			deviceclient.MustSend(t, c, p)
			got := deviceclient.Expect[protocol.LeaseConflict](t, c)
			require.Equal(t, &protocol.LeaseConflict{Type: protocol.TypeLeaseConflict, JobID: o.JobID,
				AttemptID: o.AttemptID, Reason: tc.reason}, got)
			requireUnchanged(t, before, b.snapshot(t))
			require.Equal(t, 1.0, metricValue(b.m.Conflicts.WithLabelValues(string(tc.reason))))
		})
	}
}
