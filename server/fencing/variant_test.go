//go:build mutations

package fencing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
)

// Each variant removes one fence. These tests run the sequence that fence
// exists for against the correct service and the mutant side by side (same
// seeded ids) and require the mutant to answer or write differently: proof
// that a harness comparing replies and rows can fail.

func TestVariantNoEpochCheck(t *testing.T) {
	t.Parallel()
	run := func(m fencing.Variant) (protocol.Reply, protocol.JobStatus) {
		b := setup(t, fencing.Config{Variant: m})
		offer, c := b.uploaded(t, t0)
		c.LeaseEpoch = 2 // an epoch the server never issued
		r, err := b.svc.Commit(context.Background(), t0, deviceID, c)
		require.NoError(t, err)
		return r, b.job(t, offer.JobID).Status
	}
	r, status := run(fencing.VariantNone)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitConflict}, r)
	require.Equal(t, protocol.JobActive, status)
	r, status = run(fencing.VariantNoEpochCheck)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitOK}, r, "the mutant accepts a wrong epoch")
	require.Equal(t, protocol.JobSucceeded, status)

	// The variant is confined to commit: fail still checks the epoch.
	b := setup(t, fencing.Config{Variant: fencing.VariantNoEpochCheck})
	b.createJob(t, t0, nil)
	f := failOf(b.lease(t, t0, deviceID), protocol.FailRunnerFailed)
	f.LeaseEpoch = 2
	r, err := b.svc.Fail(context.Background(), t0, deviceID, f)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeFailConflict}, r)
}

func TestVariantNoTokenCheck(t *testing.T) {
	t.Parallel()
	run := func(m fencing.Variant) (commit, fail protocol.Reply) {
		b := setup(t, fencing.Config{Variant: m})
		ctx := context.Background()
		_, c := b.uploaded(t, t0)
		c.CommitToken = "guessed"
		commit, err := b.svc.Commit(ctx, t0, deviceID, c)
		require.NoError(t, err)
		b.createJob(t, t0, nil)
		offer := b.lease(t, t0, deviceID)
		f := failOf(offer, protocol.FailRunnerFailed)
		f.CommitToken = "guessed"
		fail, err = b.svc.Fail(ctx, t0, deviceID, f)
		require.NoError(t, err)
		return commit, fail
	}
	commit, fail := run(fencing.VariantNone)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitConflict}, commit)
	require.Equal(t, protocol.Reply{Code: protocol.CodeFailConflict}, fail)
	commit, fail = run(fencing.VariantNoTokenCheck)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCommitOK}, commit, "the mutant commits without the token")
	require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK}, fail, "the mutant fails without the token")
}

// Without transaction 2's cancelling check, a good output tries cancelling
// -> succeeded, which the transition tables refuse (an internal error, and
// the job is left cancelling), and a bad output fails a job the buyer
// cancelled.
func TestVariantCommitFromCancelling(t *testing.T) {
	t.Parallel()
	run := func(m fencing.Variant, verified bool) (protocol.Reply, protocol.JobRow, error) {
		b := setup(t, fencing.Config{Variant: m})
		ctx := context.Background()
		offer, c := b.uploaded(t, t0)
		r, err := b.svc.CommitBegin(ctx, t0, deviceID, c)
		require.NoError(t, err)
		require.Equal(t, protocol.CodeCommitPending, r.Code)
		_, err = b.svc.Cancel(ctx, t0, buyerID, offer.JobID)
		require.NoError(t, err)
		r, err = b.svc.CommitFinish(ctx, t0, offer.JobID, offer.AttemptID, verified)
		return r, b.job(t, offer.JobID), err
	}
	for _, verified := range []bool{true, false} {
		r, j, err := run(fencing.VariantNone, verified)
		require.NoError(t, err)
		require.Equal(t, protocol.Reply{Code: protocol.CodeJobCancelled}, r)
		require.Equal(t, protocol.JobCancelled, j.Status)
	}
	_, j, err := run(fencing.VariantCommitFromCancelling, true)
	require.ErrorIs(t, err, fencing.ErrInternal)
	require.ErrorContains(t, err, "illegal job transition cancelling -> succeeded")
	require.Equal(t, protocol.JobCancelling, j.Status, "the mutant cannot finish the cancellation")
	r, j, err := run(fencing.VariantCommitFromCancelling, false)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeVerificationFailed}, r)
	require.Equal(t, protocol.JobFailed, j.Status, "the mutant fails a job the buyer cancelled")
}
