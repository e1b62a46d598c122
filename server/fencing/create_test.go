package fencing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// A zero now is the database clock, in every operation.
func TestDatabaseClockEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	ctx := context.Background()
	var zero time.Time
	offer, c := b.uploaded(t, zero)
	var dbNow time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT now()`).Scan(&dbNow))
	j := b.job(t, offer.JobID)
	require.WithinDuration(t, dbNow, j.CreatedAt, time.Minute)
	require.Equal(t, j.CreatedAt.Add(time.Hour), j.AdmissionDeadline)
	require.WithinDuration(t, dbNow.Add(ttl), offer.LeaseExpiresAt, time.Minute)
	r, err := b.svc.Commit(ctx, zero, deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCommitOK, r.Code)
	res, err := b.svc.Sweep(ctx, zero)
	require.NoError(t, err)
	require.Equal(t, protocol.SweepResult{}, res)
	for _, e := range b.snapshot(t).Journal {
		require.WithinDuration(t, dbNow, e.At, time.Minute)
	}
}

// The API stores a job's input inside the creating transaction; a failed
// store writes nothing: no job, no hold, no debit, no journal row.
func TestCreateJobWithInputWritesNothingWhenTheInputFails(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	ctx := context.Background()
	var seen string
	_, err := b.svc.CreateJobWithInput(ctx, t0, request(), func(_ context.Context, jobID string) error {
		seen = jobID
		return errors.New("disk full")
	})
	require.ErrorContains(t, err, "disk full")
	require.True(t, protocol.ValidID(seen), "beforeCommit ran with the new job's id")
	snap := b.snapshot(t)
	require.Empty(t, snap.Jobs)
	require.Empty(t, snap.Journal)
	require.Equal(t, protocol.BuyerRow{ID: buyerID, BalanceCents: balance}, b.buyer(t, buyerID))

	r, err := b.svc.CreateJobWithInput(ctx, t0, request(), func(_ context.Context, jobID string) error {
		seen = jobID
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCreated, r.Code)
	require.Equal(t, seen, r.JobID)
	require.Equal(t, protocol.JobQueued, b.job(t, r.JobID).Status)
}

// TestCreateJobRoundTrips checks, with the pool's tracer, that a create is
// pipelined: BEGIN with the buyer's lock (and the Idempotency-Key lookup),
// then the job's writes and COMMIT in one batch; a replay of the same key
// writes nothing, so it costs the first batch and COMMIT.
func TestCreateJobRoundTrips(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	c := store.DBCounter(b.pool)
	require.NotNil(t, c)
	count := func(create func()) dbstat.Counts {
		before := c.Snapshot()[fencing.OpCreateJob]
		create()
		return c.Snapshot()[fencing.OpCreateJob].Sub(before)
	}
	// lock buyer; insert job, hold, debit, notify, journal
	require.Equal(t, dbstat.Counts{Transactions: 1, Commits: 1, InTx: 6, RoundTrips: 2},
		count(func() { b.createJob(t, t0, nil) }))
	withKey := func(r *protocol.CreateJobRequest) { r.IdempotencyKey = "order-1" }
	require.Equal(t, dbstat.Counts{Transactions: 1, Commits: 1, InTx: 7, RoundTrips: 2},
		count(func() { b.createJob(t, t0, withKey) }), "the key's lookup rides in the first batch")
	require.Equal(t, dbstat.Counts{Transactions: 1, Commits: 1, InTx: 2, RoundTrips: 2},
		count(func() { b.createJob(t, t0, withKey) }), "a replay writes nothing")
	require.Len(t, b.snapshot(t).Jobs, 2)
	b.requireInvariants(t)
}

// TestPipelinedOperationsRoundTrips pins, with the pool's tracer, the round
// trips of the pipelined operations: BEGIN with their locks and reads in
// one batch, their writes with COMMIT in the last (Lease picks in a batch
// between), so a refusal or a write costs the same.
func TestPipelinedOperationsRoundTrips(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	ctx := context.Background()
	c := store.DBCounter(b.pool)
	require.NotNil(t, c)
	roundTrips := func(op string, run func()) int64 {
		before := c.Snapshot()[op]
		run()
		got := c.Snapshot()[op].Sub(before)
		require.Equal(t, int64(1), got.Transactions, op)
		require.Equal(t, int64(1), got.Commits, op)
		return got.RoundTrips
	}
	var offer protocol.Reply
	var commit protocol.Commit
	require.Equal(t, int64(2), roundTrips(fencing.OpCreateJob, func() { b.createJob(t, t0, nil) }), "create")
	require.Equal(t, int64(3), roundTrips(fencing.OpLease, func() { offer = b.lease(t, t0, deviceID) }), "lease with an offer")
	require.Equal(t, int64(3), roundTrips(fencing.OpLease, func() {
		r, err := b.svc.Lease(ctx, t0, deviceID)
		require.NoError(t, err)
		require.Equal(t, protocol.CodeNoJob, r.Code)
	}), "lease with no job")
	require.Equal(t, protocol.CodeProgressOK, b.progress(t, t0, deviceID, offer, protocol.AttemptUploading).Code)
	commit = commitOf(offer, b.put(t, offer, mp4.Synthetic(mp4.SyntheticParams{Seed: offer.AttemptID})))
	require.Equal(t, int64(2), roundTrips(fencing.OpCommitBegin, func() {
		r, err := b.svc.CommitBegin(ctx, t0, deviceID, commit)
		require.NoError(t, err)
		require.Equal(t, protocol.CodeCommitPending, r.Code)
	}), "commit transaction 1")
	require.Equal(t, int64(2), roundTrips(fencing.OpCommitFinish, func() {
		r, err := b.svc.CommitFinish(ctx, t0, offer.JobID, offer.AttemptID, true)
		require.NoError(t, err)
		require.Equal(t, protocol.CodeCommitOK, r.Code)
	}), "commit transaction 2")

	b.createJob(t, t0, nil)
	offer = b.lease(t, t0, deviceID)
	require.Equal(t, int64(2), roundTrips(fencing.OpFail, func() {
		r, err := b.svc.Fail(ctx, t0, deviceID, protocol.Fail{JobID: offer.JobID, AttemptID: offer.AttemptID,
			LeaseEpoch: offer.LeaseEpoch, CommitToken: offer.CommitToken, FailureCode: protocol.FailDownloadFailed})
		require.NoError(t, err)
		require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK, Requeued: true}, r)
	}), "a fail that requeues")
	offer = b.lease(t, t0, deviceID)
	require.Equal(t, int64(2), roundTrips(fencing.OpCancel, func() {
		r, err := b.svc.Cancel(ctx, t0, buyerID, offer.JobID)
		require.NoError(t, err)
		require.Equal(t, protocol.CodeCancelling, r.Code)
	}), "a cancel of an active job")
}

// A sweep that loses an expired lease and requeues its job scans for
// candidates in three statements (leases, commits, admissions), decides the
// lease in one pipelined transaction of two round trips, and marks silent
// devices offline in one statement, all counted under sweep.
func TestSweepRoundTrips(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	c := store.DBCounter(b.pool)
	require.NotNil(t, c)
	b.createJob(t, t0, nil)
	b.lease(t, t0, deviceID)
	before := c.Snapshot()[fencing.OpSweep]
	res := b.sweep(t, t0.Add(ttl))
	require.Equal(t, 1, res.Lost)
	require.Equal(t, 1, res.Requeued)
	got := c.Snapshot()[fencing.OpSweep].Sub(before)
	// In the transaction: the job and attempt locks; the attempt's end,
	// the job's requeue, the lost and jobs notices, the journal rows.
	// Outside it: the three scans and the offline update.
	require.Equal(t, dbstat.Counts{Transactions: 1, Commits: 1, InTx: 7, Outside: 4, RoundTrips: 6}, got)
}
