package gateway

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

func (b *bundle) cancel(t *testing.T, jobID string) {
	t.Helper()
	r, err := b.svc.Cancel(context.Background(), b.now(), buyerID, jobID)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCancelling, r.Code)
}

// A cancel reaches the device holding the attempt; the agent's fail
// buyer_cancelled then finalizes it and frees the slot.
func TestCancelReachesTheDevice(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c, o := b.leased(t)
	b.cancel(t, o.JobID)
	require.Equal(t, &protocol.Cancel{Type: protocol.TypeCancel, JobID: o.JobID, AttemptID: o.AttemptID},
		deviceclient.Expect[protocol.Cancel](t, c))
	deviceclient.MustSend(t, c, deviceclient.Fail(o, protocol.FailBuyerCancelled))
	require.False(t, deviceclient.Expect[protocol.FailOK](t, c).Requeued)
	require.Equal(t, protocol.JobCancelled, b.jobStatus(t, o.JobID))
}

// Two gateway processes on one database: the device is connected to B, the
// cancel is executed through A's service and pool, and B delivers it
// because it heard A's NOTIFY. B subscribed and reconciled before the
// session existed, and the session was welcomed before the cancel, so
// neither reconciliation could have delivered it.
func TestCancelCrossesGatewaysThroughNotify(t *testing.T) {
	t.Parallel()
	a := setup(t, Config{})
	b := a.peer(t, Config{})
	a.createJob(t, false)
	c := b.connect(t, token1, 1, 1)
	o := deviceclient.Expect[protocol.LeaseOffer](t, c)
	require.Empty(t, a.gw.sessionsOf(device1), "the device is not on gateway A")
	a.cancel(t, o.JobID)
	got := deviceclient.Expect[protocol.Cancel](t, c)
	require.Equal(t, o.AttemptID, got.AttemptID)
	// The rest of the attempt goes on through B as usual.
	deviceclient.MustSend(t, c, deviceclient.Fail(o, protocol.FailBuyerCancelled))
	deviceclient.Expect[protocol.FailOK](t, c)
	require.Equal(t, protocol.JobCancelled, a.jobStatus(t, o.JobID))
}

// A device that was away when its job was cancelled hears of it on its
// next session, right after welcome.
func TestPendingCancelIsSentOnReconnect(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c, o := b.leased(t)
	c.Drop()
	require.Eventually(t, func() bool { return len(b.gw.sessionsOf(device1)) == 0 }, deviceclient.Timeout, tick)
	b.cancel(t, o.JobID)
	c2 := b.connect(t, token1, 1, 0)
	require.Equal(t, o.AttemptID, deviceclient.Expect[protocol.Cancel](t, c2).AttemptID)
}

// The listener survives losing its connection: it resubscribes, and a
// cancel committed while it was away still reaches the device (the
// resubscribe reconciles from the rows).
func TestListenerReconnectsAndCatchesUp(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c, o := b.leased(t)
	ctx := context.Background()
	var killed int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()`).Scan(&killed))
	require.Equal(t, 1, killed)
	b.cancel(t, o.JobID)
	require.Equal(t, o.AttemptID, deviceclient.Expect[protocol.Cancel](t, c).AttemptID)
	require.Eventually(t, func() bool { return b.gw.subscriptions.Load() >= 2 }, deviceclient.Timeout, tick)
	// Subscribed again: a new cancel arrives by NOTIFY.
	second := b.createJob(t, false)
	deviceclient.MustSend(t, c, deviceclient.Fail(o, protocol.FailBuyerCancelled))
	deviceclient.Expect[protocol.FailOK](t, c)
	o2 := deviceclient.Expect[protocol.LeaseOffer](t, c)
	require.Equal(t, second, o2.JobID)
	b.cancel(t, second)
	require.Equal(t, o2.AttemptID, deviceclient.Expect[protocol.Cancel](t, c).AttemptID)
}
