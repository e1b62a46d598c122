package fencing_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// TestProgressIsOneStatement checks, with the pool's tracer, that a
// progress, accepted or refused, costs one statement outside any
// transaction and one round trip (the gateway's zero now, the database
// clock, is exercised by every gateway and stack test).
func TestProgressIsOneStatement(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)
	c := store.DBCounter(b.pool)
	require.NotNil(t, c)
	before := c.Snapshot()[fencing.OpProgress]
	now := t0.Add(5 * time.Second)
	require.Equal(t, protocol.CodeProgressOK, b.progress(t, now, deviceID, offer, protocol.AttemptRunning).Code)
	stale := offer
	stale.LeaseEpoch = 2
	require.Equal(t, protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: protocol.ReasonIdentityMismatch},
		b.progress(t, now, deviceID, stale, protocol.AttemptRunning))
	got := c.Snapshot()[fencing.OpProgress].Sub(before)
	require.Equal(t, dbstat.Counts{Outside: 2, RoundTrips: 2}, got, "two progresses, one statement each")

	require.Equal(t, protocol.AttemptRunning, b.attempt(t, offer.AttemptID).Status, "the refused progress wrote nothing")
}
