//go:build faultpoints

package gateway

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/faultpoint"
)

// A slots report the device sends once it has an offer already counts
// that offer; the gateway must not subtract it again, however late its
// offering goroutine is after the write. The three-way campaign's lease
// gateway once leased nothing for such a report: read before the claim
// ended, it counted the device's one free slot taken.
func TestASlotsReportAfterAnOfferCountsTheOfferOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	jobs := queuedInOrder(t, b, 2)
	reported := make(chan struct{})
	var let sync.Once
	// The first offer's writer waits; let runs before the gateway's
	// shutdown, which waits for it.
	b.svc.FaultPoints().Set(faultpoint.GatewayAfterOfferWrite, faultpoint.Once(faultpoint.Block(reported)))
	t.Cleanup(func() { let.Do(func() { close(reported) }) })

	c := b.connect(t, token1, 4, 1)
	require.Equal(t, jobs[0], deviceclient.Expect[protocol.LeaseOffer](t, c).JobID)
	// The device has the offer and one more free slot, and says so while
	// the gateway's writer is still behind its write.
	deviceclient.MustSend(t, c, &protocol.Slots{Type: protocol.TypeSlots, SlotsFree: 1})
	require.Eventually(t, func() bool { return offerAgain(b, device1) }, deviceclient.Timeout, tick,
		"the slots report was not handled")
	let.Do(func() { close(reported) })
	require.Equal(t, jobs[1], deviceclient.Expect[protocol.LeaseOffer](t, c).JobID)
	requireLiveAttempts(t, b, device1, 2)
}

// offerAgain reports whether a wake came during the device's session's
// running offer pass.
func offerAgain(b *bundle, deviceID string) bool {
	return anySession(b, deviceID, func(s *session) bool { return s.offerAgain })
}

// An offer whose session ended while its Lease ran cannot be written: it
// is withdrawn at once, its job queued again with the attempt uncharged,
// and the ended session leases nothing more, though it had a second free
// slot and a second job was queued (SPEC section 5).
func TestOfferLeasedAsTheSessionEndedIsWithdrawn(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	jobs := queuedInOrder(t, b, 2)
	picked := make(chan struct{})
	var let sync.Once
	b.svc.FaultPoints().Set(faultpoint.LeaseBeforePick, faultpoint.Once(faultpoint.Block(picked)))
	t.Cleanup(func() { let.Do(func() { close(picked) }) })

	c := b.connect(t, token1, 2, 2)
	require.Eventually(t, func() bool { return offering(b, device1) }, deviceclient.Timeout, tick, "no lease began")
	c.Drop()
	require.Eventually(t, func() bool { return len(b.gw.sessionsOf(device1)) == 0 }, deviceclient.Timeout, tick)
	let.Do(func() { close(picked) })
	b.sessionsServed(t)

	s := b.snapshot(t)
	require.Len(t, s.Attempts, 1, "the ended session leased once, for the pass already running")
	require.Equal(t, jobs[0], s.Attempts[0].JobID)
	require.Equal(t, protocol.AttemptFailed, s.Attempts[0].Status)
	require.Equal(t, protocol.FailOfferWithdrawn, s.Attempts[0].FailureCode)
	for _, j := range s.Jobs {
		require.Equal(t, protocol.JobQueued, j.Status)
		require.Zero(t, j.AttemptCount-j.WithdrawnCount, "job %s spent an attempt", j.ID)
	}
	requireInvariants(t, b.pool)
}
