package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/store"
)

// roundTrips is a pool that counts the batches sent through it.
type roundTrips struct {
	*pgxpool.Pool
	n int
}

func (r *roundTrips) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	r.n++
	return r.Pool.SendBatch(ctx, b)
}

// auditedQueuedJob is a fresh database holding the queued job, and an
// artifact store for Audit.
func auditedQueuedJob(t *testing.T) (*pgxpool.Pool, artifact.Store) {
	t.Helper()
	pool := newPool(t)
	seedQueuedJob(t, pool)
	st, err := artifact.NewFSUnsynced(t.TempDir())
	require.NoError(t, err)
	return pool, st
}

// TestAuditReusesTheChecksOnlyWhileNoRowChanges holds Audit to its rule:
// the SQL checks' last result stands, without evaluating them (one round
// trip), exactly while no row of their tables was inserted, updated or
// deleted; any such change, whoever made it, is evaluated (a second round
// trip). ExpectWrites evaluates in the first round trip and changes no
// result.
func TestAuditReusesTheChecksOnlyWhileNoRowChanges(t *testing.T) {
	t.Parallel()
	pool, st := auditedQueuedJob(t)
	ctx := context.Background()
	q := &roundTrips{Pool: pool}
	var s store.Scope
	audit := func(what string, trips int) []int {
		t.Helper()
		before := q.n
		vs, snap, err := store.Audit(ctx, q, st, &s)
		require.NoError(t, err, what)
		require.Len(t, snap.Buyers, 1, what)
		require.Equal(t, trips, q.n-before, "%s: round trips", what)
		var got []int
		for _, v := range vs {
			got = append(got, v.Invariant)
		}
		return got
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}

	require.Empty(t, audit("first audit", 1), "the first evaluates in its one round trip")
	require.Empty(t, audit("nothing written", 1))

	exec(`UPDATE buyers SET balance_cents = balance_cents + 1`)
	require.Equal(t, []int{7}, audit("money from nowhere", 2))
	require.Equal(t, []int{7}, audit("nothing written since", 1), "the last result stands")
	exec(`UPDATE buyers SET balance_cents = balance_cents - 1`)
	require.Empty(t, audit("money put back", 2))

	// A delete leaves no xmin behind: the count shows it.
	exec(`DELETE FROM holds WHERE job_id = $1`, jobID)
	require.Equal(t, []int{7, 7}, audit("hold deleted (the job's and the buyer's check)", 2))
	require.Equal(t, []int{7, 7}, audit("nothing written since", 1))

	// An update that leaves every value as it was still writes a row.
	exec(`INSERT INTO holds (job_id, buyer_id, amount_cents, status, created_at) VALUES ($1, $2, 10, 'held', $3)`, jobID, buyerID, t0)
	require.Empty(t, audit("hold back", 2))
	exec(`UPDATE devices SET slots_total = slots_total`)
	require.Empty(t, audit("device rewritten", 2))

	// A change in any table the checks read is seen, the journal's too.
	exec(`INSERT INTO job_events (kind, job_id, from_status, to_status, actor, at) VALUES ('job', $1, 'queued', 'active', 'matcher', $2)`, jobID, t0)
	require.Equal(t, []int{4}, audit("journal row with no transition behind it", 2))

	s.ExpectWrites = true
	require.Equal(t, []int{4}, audit("expecting writes, none made", 1), "the same result, evaluated")
	exec(`DELETE FROM job_events WHERE from_status = 'queued'`)
	require.Empty(t, audit("expecting writes, one made", 1))
}

// TestAuditProjectsWhatSnapshotDoes checks Audit's projection against
// Snapshot's, whole and scoped to a named job.
func TestAuditProjectsWhatSnapshotDoes(t *testing.T) {
	t.Parallel()
	pool, st := auditedQueuedJob(t)
	ctx := context.Background()
	want, err := store.Snapshot(ctx, pool)
	require.NoError(t, err)
	_, got, err := store.Audit(ctx, pool, st, &store.Scope{Whole: true})
	require.NoError(t, err)
	require.Equal(t, want, got)
	s := store.Scope{}
	_, got, err = store.Audit(ctx, pool, st, &s)
	require.NoError(t, err)
	require.Equal(t, want, got, "the first scoped audit takes every job")
	s.Jobs = []string{jobID}
	_, got, err = store.Audit(ctx, pool, st, &s)
	require.NoError(t, err)
	require.Equal(t, want.Jobs, got.Jobs, "the named job, unwritten")
	s.Jobs, s.JournalFrom = nil, 1
	_, got, err = store.Audit(ctx, pool, st, &s)
	require.NoError(t, err)
	require.Equal(t, protocol.Snapshot{Buyers: want.Buyers, Devices: want.Devices}, got, "nothing named or written, the journal from its end")
}
