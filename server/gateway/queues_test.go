package gateway

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// A freed slot runs no Lease while nothing was announced since a Lease
// found the device's services empty; the next announcement leases again.
func TestNoJobIsRememberedUntilAJobIsAnnounced(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	counter := store.DBCounter(b.pool)
	require.NotNil(t, counter)
	leases := func() int64 { return counter.Snapshot()[fencing.OpLease].Transactions }
	c := b.connect(t, token1, 4, 1) // the welcome's offer pass leases and finds nothing
	require.Eventually(t, func() bool { return b.gw.queues.known(services) }, deviceclient.Timeout, tick)
	require.Equal(t, int64(1), leases())

	// Two slots reports later, still one Lease: both passes were skipped.
	for i := range 2 {
		deviceclient.MustSend(t, c, &protocol.Slots{Type: protocol.TypeSlots, SlotsFree: 1})
		require.Eventually(t, func() bool { return metricValue(b.m.LeasesSkipped) == float64(i+1) },
			deviceclient.Timeout, tick)
	}
	require.Equal(t, int64(1), leases())

	// A created job is announced, and the announcement leases it.
	jobID := b.createJob(t, true)
	require.Equal(t, jobID, deviceclient.Expect[protocol.LeaseOffer](t, c).JobID)
	require.Equal(t, int64(2), leases())
}

// The memo itself: trusted only while the listener is subscribed, stale
// after any change, and never set back by a Lease that began earlier.
func TestEmptyQueuesMemo(t *testing.T) {
	var q emptyQueues
	svcs := []string{"a", "b"}
	q.found(svcs, q.now())
	require.False(t, q.known(svcs), "untrusted: the listener is not subscribed")

	q.trust(true)
	early := q.now()
	q.found(svcs, early)
	require.True(t, q.known(svcs))
	require.True(t, q.known([]string{"a"}))
	require.False(t, q.known([]string{"a", "c"}), "c was never found empty")
	require.False(t, q.known(nil))

	q.changed() // a job was announced
	require.False(t, q.known(svcs))
	late := q.now()
	q.found([]string{"a"}, late)
	q.found([]string{"a"}, early) // a slow Lease begun before the announcement
	require.True(t, q.known([]string{"a"}))
	require.False(t, q.known(svcs), "b was found empty before the announcement only")

	q.trust(false) // the listener dropped
	require.False(t, q.known([]string{"a"}))
}
