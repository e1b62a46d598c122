package fencing_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/fencing"
)

// succeed runs one job through to succeeded at now, its input stored, and
// returns the offer.
func (b *bundle) succeed(t *testing.T, now time.Time) protocol.Reply {
	t.Helper()
	offer, c := b.uploaded(t, now)
	_, err := b.store.Put(context.Background(), protocol.InputKey(offer.JobID), bytes.NewReader([]byte("input")))
	require.NoError(t, err)
	r, err := b.svc.Commit(context.Background(), now, deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCommitOK, r.Code, "%+v", r)
	return offer
}

func (b *bundle) stored(t *testing.T, key string) bool {
	t.Helper()
	_, err := b.store.Stat(context.Background(), key)
	if errors.Is(err, artifact.ErrNotFound) {
		return false
	}
	require.NoError(t, err)
	return true
}

// A prune removes the finished jobs older than its bound with their rows
// and objects, and nothing else: not a job finished at or after the bound,
// not an unfinished job; the invariants hold on what is left (setup's
// cleanup checks them), the buyer's ledger included.
func TestPruneRemovesOnlyOldFinishedJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	ctx := context.Background()
	old := b.succeed(t, t0)
	recent := b.succeed(t, t0.Add(time.Hour))
	queued := b.createJob(t, t0, nil)
	captured := b.buyer(t, buyerID).CapturedCents
	events := int64(len(b.journalOf(t, old.JobID)))

	dry, err := b.svc.CountPrunable(ctx, t0.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, int64(1), dry.Jobs)
	require.Equal(t, int64(1), dry.Attempts)
	require.Len(t, b.snapshot(t).Jobs, 3, "a dry run changes nothing")

	// The bound is strict: the job finished at t0+1h is not older than it.
	st, err := b.svc.PruneFinished(ctx, t0.Add(time.Hour), 1)
	require.NoError(t, err)
	require.Equal(t, fencing.PruneStats{Jobs: 1, Attempts: 1, Events: events, Holds: 1, Webhooks: 1, Objects: 2, Batches: 1}, st)
	snap := b.snapshot(t)
	require.Len(t, snap.Jobs, 2)
	for _, e := range snap.Journal {
		require.NotEqual(t, old.JobID, e.JobID, "a pruned job's journal rows are gone")
	}
	require.False(t, b.stored(t, protocol.OutputKey(old.JobID, old.AttemptID)))
	require.False(t, b.stored(t, protocol.InputKey(old.JobID)))
	require.True(t, b.stored(t, protocol.OutputKey(recent.JobID, recent.AttemptID)))
	require.Equal(t, captured, b.buyer(t, buyerID).CapturedCents, "captured money stays captured")

	// Far past everything: the recent job goes, the queued one stays.
	st, err = b.svc.PruneFinished(ctx, t0.Add(1000*time.Hour), 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Jobs)
	snap = b.snapshot(t)
	require.Len(t, snap.Jobs, 1)
	require.Equal(t, queued, snap.Jobs[0].ID)
}

// A store that fails a delete leaves the object's key queued: the rows are
// gone, and the next prune deletes the object first.
func TestPruneRetriesObjectsItCouldNotDelete(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	ctx := context.Background()
	old := b.succeed(t, t0)
	b.store.deleteBroken.Store(true)
	_, err := b.svc.PruneFinished(ctx, t0.Add(time.Minute), 0)
	require.ErrorIs(t, err, errDiskGone)
	require.Empty(t, b.snapshot(t).Jobs, "the rows went in their own transaction")
	require.True(t, b.stored(t, protocol.OutputKey(old.JobID, old.AttemptID)), "an orphan until the next prune")

	b.store.deleteBroken.Store(false)
	st, err := b.svc.PruneFinished(ctx, t0.Add(time.Minute), 0)
	require.NoError(t, err)
	require.Equal(t, fencing.PruneStats{Objects: 2}, st)
	require.False(t, b.stored(t, protocol.OutputKey(old.JobID, old.AttemptID)))
	require.False(t, b.stored(t, protocol.InputKey(old.JobID)))
	dry, err := b.svc.CountPrunable(ctx, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, fencing.PruneStats{}, dry, "nothing left queued")
}
