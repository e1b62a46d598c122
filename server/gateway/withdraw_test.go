package gateway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

// attemptRow reads an attempt's projected row.
func (b *bundle) attemptRow(t *testing.T, attemptID string) protocol.AttemptRow {
	t.Helper()
	for _, a := range b.snapshot(t).Attempts {
		if a.ID == attemptID {
			return a
		}
	}
	t.Fatalf("no attempt %s", attemptID)
	return protocol.AttemptRow{}
}

// sessionsServed waits until every session of the gateway has ended and
// its serve has returned, withdrawals included.
func (b *bundle) sessionsServed(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		b.gw.mu.Lock()
		defer b.gw.mu.Unlock()
		return len(b.gw.all) == 0
	}, deviceclient.Timeout, tick, "a session is still being served")
}

// A device that closes its session normally (the agent stopping) acts on
// nothing more sent on it: an offer it never answered there is withdrawn,
// its job queued again with the attempt uncharged; an offer it answered
// is left to it (SPEC section 5).
func TestNormalCloseWithdrawsOnlyUnansweredOffers(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	queuedInOrder(t, b, 2)
	c := b.connect(t, token1, 2, 2)
	answered := deviceclient.Expect[protocol.LeaseOffer](t, c)
	unanswered := deviceclient.Expect[protocol.LeaseOffer](t, c)
	deviceclient.MustSend(t, c, deviceclient.Progress(answered, protocol.AttemptDownloading))
	deviceclient.Expect[protocol.ProgressOK](t, c)
	c.Close()
	b.sessionsServed(t)

	a := b.attemptRow(t, unanswered.AttemptID)
	require.Equal(t, protocol.AttemptFailed, a.Status)
	require.Equal(t, protocol.FailOfferWithdrawn, a.FailureCode)
	require.Equal(t, protocol.JobQueued, b.jobStatus(t, unanswered.JobID))
	require.Equal(t, protocol.AttemptDownloading, b.attemptRow(t, answered.AttemptID).Status)
	require.Equal(t, 1.0, metricValue(b.m.Withdrawals.WithLabelValues(string(protocol.CodeWithdrawn))))
	requireInvariants(t, b.pool)
}

// A connection that drops (no close frame: a crash, a network loss) keeps
// its offers: the device may come back for them, and the sweeper ends the
// ones it does not.
func TestDroppedSessionKeepsItsOffers(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c, o := b.leased(t)
	c.Drop()
	b.sessionsServed(t)
	require.Equal(t, protocol.AttemptLeased, b.attemptRow(t, o.AttemptID).Status)
	require.Equal(t, protocol.JobActive, b.jobStatus(t, o.JobID))
}

// A fail provider_offline on an agent's second signal frees no slot, so the
// requeued job is not offered back to the stopping agent, which would fail
// it again, and the agent's normal closure after it withdraws nothing: the
// job keeps its attempt spent by the agent and no other (issue 48).
func TestStoppingAgentKeepsTheBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	queuedInOrder(t, b, 2)
	c := b.connect(t, token1, 2, 2)
	o1 := deviceclient.Expect[protocol.LeaseOffer](t, c)
	o2 := deviceclient.Expect[protocol.LeaseOffer](t, c)
	for _, o := range []*protocol.LeaseOffer{o1, o2} {
		deviceclient.MustSend(t, c, deviceclient.Progress(o, protocol.AttemptRunning))
		deviceclient.Expect[protocol.ProgressOK](t, c)
	}
	for _, o := range []*protocol.LeaseOffer{o1, o2} {
		deviceclient.MustSend(t, c, deviceclient.Fail(o, protocol.FailProviderOffline))
		require.True(t, deviceclient.Expect[protocol.FailOK](t, c).Requeued)
	}
	deviceclient.ExpectNone(t, c, 300*time.Millisecond, "an offer to a device failing provider_offline")
	c.Close()
	b.sessionsServed(t)
	for _, o := range []*protocol.LeaseOffer{o1, o2} {
		require.Equal(t, protocol.JobQueued, b.jobStatus(t, o.JobID))
	}
	s := b.snapshot(t)
	require.Len(t, s.Attempts, 2, "one attempt per job: the one the agent failed")
	for _, j := range s.Jobs {
		require.Equal(t, 1, j.AttemptCount-j.WithdrawnCount)
	}
}
