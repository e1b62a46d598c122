package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server"
	"github.com/rendermac/rendermac/server/store"
)

func TestCreateJobCreated(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	id := b.createJob(t, t0, nil)
	require.True(t, protocol.ValidID(id))
	require.Equal(t, protocol.JobRow{ID: id, BuyerID: buyerID, Service: "synthetic.mp4", Status: protocol.JobQueued,
		MaxAttempts: 3, CreatedAt: t0, AdmissionDeadline: t0.Add(time.Hour), HoldStatus: protocol.HoldHeld,
		HoldCents: price}, b.job(t, id))
	require.Equal(t, protocol.BuyerRow{ID: buyerID, BalanceCents: balance - price, HeldCents: price}, b.buyer(t, buyerID))
	require.Equal(t, []string{"job ->queued  buyer"}, b.journalOf(t, id))
}

// A zero now is the database clock, in every operation.
func TestDatabaseClockEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
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

func TestCreateJobNotFoundBuyer(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	for _, id := range []string{missingID, "not-a-uuid", strings.ToUpper(buyerID)} {
		req := request()
		req.BuyerID = id
		req.Service = "unknown" // the buyer check comes first
		r, err := b.svc.CreateJob(context.Background(), t0, req)
		require.NoError(t, err)
		require.Equal(t, protocol.Reply{Code: protocol.CodeNotFound, Field: "buyer"}, r, id)
	}
	require.Empty(t, b.snapshot(t).Jobs)
}

func TestCreateJobValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	many := map[string]string{}
	for i := range 33 {
		many[strings.Repeat("k", 1+i%32)+string(rune('a'+i/32))] = "v"
	}
	cases := []struct {
		field string
		edit  func(*protocol.CreateJobRequest)
	}{
		{"service", func(r *protocol.CreateJobRequest) { r.Service = "ffmpeg.av1"; r.MaxAttempts = 0 }},
		{"max_attempts", func(r *protocol.CreateJobRequest) { r.MaxAttempts = 0; r.AdmissionWindow = 0 }},
		{"max_attempts", func(r *protocol.CreateJobRequest) { r.MaxAttempts = 11 }},
		{"admission_window", func(r *protocol.CreateJobRequest) { r.AdmissionWindow = time.Second - 1; r.Input.Bytes = -1 }},
		{"admission_window", func(r *protocol.CreateJobRequest) { r.AdmissionWindow = 7*24*time.Hour + 1 }},
		{"input.bytes", func(r *protocol.CreateJobRequest) { r.Input.Bytes = -1; r.Input.SHA256 = "" }},
		{"input.sha256", func(r *protocol.CreateJobRequest) { r.Input.SHA256 = strings.ToUpper(inputSHA) }},
		{"input.sha256", func(r *protocol.CreateJobRequest) { r.Input.SHA256 = inputSHA[:63] }},
		{"params", func(r *protocol.CreateJobRequest) { r.Params = many }},
		{"params", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"Bad": "v"} }},
		{"params", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{strings.Repeat("k", 33): "v"} }},
		{"params", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"k": strings.Repeat("v", 257)} }},
		{"idempotency_key", func(r *protocol.CreateJobRequest) { r.IdempotencyKey = strings.Repeat("i", 201) }},
		// What Postgres text and jsonb cannot hold is refused before it gets there.
		{"params", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"k": "a\x00b"} }},
		{"params", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"k": "a\xffb"} }},
		{"idempotency_key", func(r *protocol.CreateJobRequest) { r.IdempotencyKey = "key\x00" }},
		{"idempotency_key", func(r *protocol.CreateJobRequest) { r.IdempotencyKey = "key\xc3" }},
	}
	for _, c := range cases {
		req := request()
		c.edit(&req)
		r, err := b.svc.CreateJob(context.Background(), t0, req)
		require.NoError(t, err)
		require.Equal(t, protocol.Reply{Code: protocol.CodeValidation, Field: c.field}, r)
	}
	// The bounds themselves are valid.
	b.createJob(t, t0, func(r *protocol.CreateJobRequest) {
		r.MaxAttempts, r.AdmissionWindow, r.IdempotencyKey = 10, 7*24*time.Hour, strings.Repeat("i", 200)
		r.Params = map[string]string{strings.Repeat("k", 32): strings.Repeat("v", 256)}
	})
	b.createJob(t, t0, func(r *protocol.CreateJobRequest) { r.MaxAttempts, r.AdmissionWindow = 1, time.Second })
	require.Len(t, b.snapshot(t).Jobs, 2, "validation errors write nothing")
}

func TestCreateJobInsufficientFunds(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	poor := "00000000-0000-4000-8000-0000000000b3"
	require.NoError(t, b.svc.CreateBuyer(context.Background(), poor, "poor", price-1))
	req := request()
	req.BuyerID = poor
	r, err := b.svc.CreateJob(context.Background(), t0, req)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeInsufficientFunds}, r)
	require.Empty(t, b.snapshot(t).Jobs)
	require.Equal(t, protocol.BuyerRow{ID: poor, BalanceCents: price - 1}, b.buyer(t, poor))
}

func TestCreateJobIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	withKey := func(r *protocol.CreateJobRequest) { r.IdempotencyKey = "order-1" }
	id := b.createJob(t, t0, withKey)

	// Same key, same request: the same job back, nothing written.
	req := request()
	withKey(&req)
	r, err := b.svc.CreateJob(context.Background(), t0.Add(time.Minute), req)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeCreated, JobID: id, Existing: true}, r)
	require.Len(t, b.snapshot(t).Jobs, 1)
	require.Equal(t, int64(balance-price), b.buyer(t, buyerID).BalanceCents)

	// Same key, different request (params, then window): a conflict.
	for _, edit := range []func(*protocol.CreateJobRequest){
		func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"seed": "b"} },
		func(r *protocol.CreateJobRequest) { r.AdmissionWindow = 2 * time.Hour },
	} {
		req := request()
		withKey(&req)
		edit(&req)
		r, err = b.svc.CreateJob(context.Background(), t0, req)
		require.NoError(t, err)
		require.Equal(t, protocol.Reply{Code: protocol.CodeIdempotencyConflict}, r)
	}
	require.Len(t, b.snapshot(t).Jobs, 1)

	// Keys are per buyer.
	other := b.createJob(t, t0, func(r *protocol.CreateJobRequest) { withKey(r); r.BuyerID = otherBuyerID })
	require.NotEqual(t, id, other)
}

// The API stores a job's input inside the creating transaction; a failed
// store writes nothing: no job, no hold, no debit, no journal row.
func TestCreateJobWithInputWritesNothingWhenTheInputFails(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
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
// then the job's writes in one batch, then COMMIT; a replay of the same key
// writes nothing, so it costs the first batch and COMMIT.
func TestCreateJobRoundTrips(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	c := store.DBCounter(b.pool)
	require.NotNil(t, c)
	count := func(create func()) dbstat.Counts {
		before := c.Snapshot()[server.OpCreateJob]
		create()
		return c.Snapshot()[server.OpCreateJob].Sub(before)
	}
	// lock buyer; insert job, hold, debit, notify, journal
	require.Equal(t, dbstat.Counts{Transactions: 1, Commits: 1, InTx: 6, RoundTrips: 3},
		count(func() { b.createJob(t, t0, nil) }))
	withKey := func(r *protocol.CreateJobRequest) { r.IdempotencyKey = "order-1" }
	require.Equal(t, dbstat.Counts{Transactions: 1, Commits: 1, InTx: 7, RoundTrips: 3},
		count(func() { b.createJob(t, t0, withKey) }), "the key's lookup rides in the first batch")
	require.Equal(t, dbstat.Counts{Transactions: 1, Commits: 1, InTx: 2, RoundTrips: 2},
		count(func() { b.createJob(t, t0, withKey) }), "a replay writes nothing")
	require.Len(t, b.snapshot(t).Jobs, 2)
	b.requireInvariants(t)
}
