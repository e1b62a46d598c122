package gateway

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A report of no free slot that meets a claim still in flight, whose
// Lease then says no_slot, leaves no slot free: the claim gives back the
// slot it took, not one the report said was taken. Clamped at zero, the
// count said one slot free, and a stopping agent that had failed its
// attempts provider_offline was offered a requeued job on its closing
// session (scenario agent_second_signal_keeps_budget, seen in CI).
func TestAReportDuringAClaimThatLeasesNothingKeepsItsCount(t *testing.T) {
	t.Parallel()
	s := &session{ctx: context.Background(), welcomed: true, slotsTotal: 2, slotsFree: 1}
	require.True(t, s.claim())
	s.reportSlots(0) // the device has every slot taken; the claim's Lease has not answered
	s.unclaim(1)     // Lease said no_slot
	require.Equal(t, 0, s.slotsFree)
	require.False(t, s.claim(), "a device that reported no free slot was claimed into")

	s.reportSlots(2)
	require.Equal(t, 2, s.slotsFree, "a report with no claim in flight is the count")
	s.reportSlots(5)
	require.Equal(t, 2, s.slotsFree, "a report is bounded by slots_total")
	s.reportSlots(-1)
	require.Equal(t, 0, s.slotsFree, "a negative report counts as none")
}

// An ended session claims nothing, whatever its count says: an offer made
// on it could only be withdrawn.
func TestAnEndedSessionClaimsNothing(t *testing.T) {
	t.Parallel()
	s := &session{ctx: context.Background(), welcomed: true, slotsTotal: 2, slotsFree: 2, ended: true}
	require.False(t, s.claim())
}
