package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/gateway/gatewaytest"
)

// Only the holder of the advisory lock sweeps: while another process holds
// it, a pass does nothing.
func TestSweepRunsOnlyUnderTheAdvisoryLock(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	other, err := pgx.Connect(ctx, b.url)
	require.NoError(t, err)
	defer other.Close(ctx)
	_, err = other.Exec(ctx, `SELECT pg_advisory_lock($1)`, sweepLockKey)
	require.NoError(t, err)
	ran, err := b.gw.sweepOnce(ctx)
	require.NoError(t, err)
	require.False(t, ran, "swept while another gateway held the lock")
	require.Zero(t, metricValue(b.m.Sweeps))
	_, err = other.Exec(ctx, `SELECT pg_advisory_unlock($1)`, sweepLockKey)
	require.NoError(t, err)
	ran, err = b.gw.sweepOnce(ctx)
	require.NoError(t, err)
	require.True(t, ran)
	require.Equal(t, 1.0, metricValue(b.m.Sweeps))
}

// An expired lease is swept (lost, job requeued); the gateway tells the
// session (lease_conflict attempt_lost), counts the slot free again and
// offers attempt 2 with no slots report from the agent; a late progress of
// attempt 1 then finds it terminal.
func TestSweptLeaseIsRequeuedAndOfferedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c, o := b.leased(t)
	b.clock.Advance(ttl)
	ran, err := b.gw.sweepOnce(context.Background())
	require.NoError(t, err)
	require.True(t, ran)
	require.Equal(t, 1.0, metricValue(b.m.SweepChanges.WithLabelValues("lost")))
	require.Equal(t, 1.0, metricValue(b.m.SweepChanges.WithLabelValues("requeued")))
	lost := gatewaytest.Expect[protocol.LeaseConflict](t, c)
	require.Equal(t, protocol.ReasonAttemptLost, lost.Reason)
	require.Equal(t, o.AttemptID, lost.AttemptID)
	again := gatewaytest.Expect[protocol.LeaseOffer](t, c)
	require.Equal(t, o.JobID, again.JobID)
	require.Equal(t, 2, again.AttemptNumber)
	gatewaytest.MustSend(t, c, gatewaytest.Progress(o, protocol.AttemptRunning))
	require.Equal(t, protocol.ReasonAttemptTerminal, gatewaytest.Expect[protocol.LeaseConflict](t, c).Reason)
}

// The Run loop sweeps on its own (database clock, real timers).
func TestRunSweepsPeriodically(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Clock: realClock, SweepInterval: 10 * time.Millisecond})
	require.Eventually(t, func() bool { return metricValue(b.m.Sweeps) >= 2 }, gatewaytest.Timeout, tick)
}
