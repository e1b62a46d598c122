package gateway

import (
	"context"
	"net/http"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

// An agent that reconnects goes on with the attempt it holds: the new
// session accepts its progress and commit, and nothing is re-offered (no
// token is ever sent twice). Its new hello supersedes the old session.
func TestReconnectedAgentContinuesItsAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c1, o := b.leased(t)
	b.createJob(t, false)
	c2 := b.connect(t, token1, 1, 0)
	deviceclient.ExpectClosed(t, c1, websocket.StatusGoingAway)
	deviceclient.MustSend(t, c2, deviceclient.Progress(o, protocol.AttemptRunning))
	// The first frame after welcome answers the progress: no offer came.
	require.Equal(t, o.AttemptID, deviceclient.Expect[protocol.ProgressOK](t, c2).AttemptID)
	uploading(t, c2, o)
	deviceclient.MustSend(t, c2, deviceclient.Commit(o, b.putOutput(t, o)))
	deviceclient.Expect[protocol.CommitOK](t, c2)
	next := deviceclient.Expect[protocol.LeaseOffer](t, c2)
	require.NotEqual(t, o.JobID, next.JobID)
	require.Equal(t, 1.0, metricValue(b.m.Sessions))
}

// Shutdown lets a commit already being verified finish and its result
// reach the agent, refuses new sessions meanwhile, and then closes 1001.
func TestShutdownDrainsInFlightFramesThenCloses1001(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c, o := b.leased(t)
	uploading(t, c, o)
	out := b.putOutput(t, o)
	opened, release := b.store.holdReads()
	deviceclient.MustSend(t, c, deviceclient.Commit(o, out))
	<-opened // verification is in flight
	shut := make(chan error, 1)
	go func() { shut <- b.gw.Shutdown(context.Background()) }()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), deviceclient.Timeout)
		defer cancel()
		_, resp, err := deviceclient.Dial(ctx, b.wsURL(), token2)
		return err != nil && resp != nil && resp.StatusCode == http.StatusServiceUnavailable
	}, deviceclient.Timeout, tick, "a draining gateway refuses new sessions")
	release()
	deviceclient.Expect[protocol.CommitOK](t, c)
	deviceclient.ExpectClosed(t, c, websocket.StatusGoingAway)
	require.NoError(t, <-shut)
	require.Equal(t, protocol.JobSucceeded, b.jobStatus(t, o.JobID))
}

// A device revoked during its session gets no more offers, but may still
// finish what it holds (its attempts keep their fences).
func TestRevokedDeviceGetsNoMoreOffers(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c, o := b.leased(t)
	require.NoError(t, b.svc.RevokeDevice(context.Background(), device1))
	b.createJob(t, false)
	deviceclient.MustSend(t, c, &protocol.Slots{Type: protocol.TypeSlots, SlotsFree: 1})
	require.Eventually(t, func() bool {
		s := b.gw.sessionsOf(device1)
		if len(s) != 1 {
			return false
		}
		s[0].mu.Lock()
		defer s[0].mu.Unlock()
		return s[0].revoked
	}, deviceclient.Timeout, tick)
	requireLiveAttempts(t, b, device1, 1)
	uploading(t, c, o)
	deviceclient.MustSend(t, c, deviceclient.Commit(o, b.putOutput(t, o)))
	deviceclient.Expect[protocol.CommitOK](t, c)
	// And a new session is refused before the upgrade.
	ctx, cancel := context.WithTimeout(context.Background(), deviceclient.Timeout)
	defer cancel()
	_, resp, err := deviceclient.Dial(ctx, b.wsURL(), token1)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// Neither the device token nor any commit token ever reaches the logs,
// whatever happens to the frames that carry them.
func TestTokensNeverReachTheLogs(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c, o := b.leased(t)
	second := b.createJob(t, false)
	uploading(t, c, o)
	bad := deviceclient.Commit(o, b.putOutput(t, o))
	bad.Output.SHA256 = "not-hex"
	deviceclient.MustSend(t, c, bad)
	deviceclient.Expect[protocol.ErrorMessage](t, c)
	wrong := deviceclient.Commit(o, b.putOutput(t, o))
	wrong.LeaseEpoch = 7
	deviceclient.MustSend(t, c, wrong)
	deviceclient.Expect[protocol.CommitRejected](t, c)
	deviceclient.MustSend(t, c, deviceclient.Commit(o, b.putOutput(t, o)))
	deviceclient.Expect[protocol.CommitOK](t, c)
	o2 := deviceclient.Expect[protocol.LeaseOffer](t, c)
	require.Equal(t, second, o2.JobID)
	deviceclient.MustSend(t, c, deviceclient.Fail(o2, protocol.FailRunnerFailed))
	deviceclient.Expect[protocol.FailOK](t, c)
	logs := b.logs.String()
	require.Contains(t, logs, o.AttemptID, "the test must see the session's logs")
	for _, secret := range []string{token1, o.CommitToken, o2.CommitToken} {
		require.NotContains(t, logs, secret)
	}
}
