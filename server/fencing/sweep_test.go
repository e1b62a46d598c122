package fencing_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
)

func (b *bundle) sweep(t *testing.T, now time.Time) protocol.SweepResult {
	t.Helper()
	res, err := b.svc.Sweep(context.Background(), now)
	require.NoError(t, err)
	return res
}

// A store I/O error is not a verification failure: the attempt stays
// committing until a sweep can read the store again.
func TestSweepRetriesVerificationAfterStoreError(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	ctx := context.Background()
	offer, c := b.uploaded(t, t0)
	b.store.broken.Store(true)
	_, err := b.svc.Commit(ctx, t0, deviceID, c)
	require.ErrorIs(t, err, errDiskGone)
	require.Equal(t, protocol.AttemptCommitting, b.attempt(t, offer.AttemptID).Status)
	require.Equal(t, protocol.JobVerifying, b.job(t, offer.JobID).Status)

	res, err := b.svc.Sweep(ctx, t0.Add(ttl))
	require.ErrorIs(t, err, errDiskGone)
	require.Equal(t, protocol.SweepResult{}, res)
	require.Equal(t, protocol.AttemptCommitting, b.attempt(t, offer.AttemptID).Status)

	b.store.broken.Store(false)
	require.Equal(t, protocol.SweepResult{Reverified: 1, Succeeded: 1}, b.sweep(t, t0.Add(ttl)))
	require.Equal(t, protocol.JobSucceeded, b.job(t, offer.JobID).Status)
}
