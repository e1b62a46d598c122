package store_test

import (
	"context"
	"strings"
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
// the SQL checks' last result stands, without evaluating them, and the
// projection is reported unchanged, without reading it (one round trip),
// exactly while no row of their tables was inserted, updated or deleted;
// any such change, whoever made it, is evaluated and projected (a second
// round trip). ExpectWrites evaluates and projects in the first round
// trip and changes no result; Whole always projects.
func TestAuditReusesTheChecksOnlyWhileNoRowChanges(t *testing.T) {
	t.Parallel()
	pool, st := auditedQueuedJob(t)
	ctx := context.Background()
	q := &roundTrips{Pool: pool}
	var s store.Scope
	const same, read = true, false
	audit := func(what string, trips int, unchanged bool) []int {
		t.Helper()
		before := q.n
		vs, snap, gotUnchanged, err := store.Audit(ctx, q, st, &s)
		require.NoError(t, err, what)
		require.Equal(t, trips, q.n-before, "%s: round trips", what)
		require.Equal(t, unchanged, gotUnchanged, "%s: unchanged", what)
		if unchanged {
			require.Equal(t, protocol.Snapshot{}, snap, "%s: no projection read", what)
		} else {
			require.Len(t, snap.Buyers, 1, "%s: the projection read", what)
		}
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

	require.Empty(t, audit("first audit", 1, read), "the first evaluates in its one round trip")
	require.Empty(t, audit("nothing written", 1, same))

	exec(`UPDATE buyers SET balance_cents = balance_cents + 1`)
	require.Equal(t, []int{7}, audit("money from nowhere", 2, read))
	require.Equal(t, []int{7}, audit("nothing written since", 1, same), "the last result stands")
	exec(`UPDATE buyers SET balance_cents = balance_cents - 1`)
	require.Empty(t, audit("money put back", 2, read))

	// A delete leaves no xmin behind: the count shows it.
	exec(`DELETE FROM holds WHERE job_id = $1`, jobID)
	require.Equal(t, []int{7, 7}, audit("hold deleted (the job's and the buyer's check)", 2, read))
	require.Equal(t, []int{7, 7}, audit("nothing written since", 1, same))

	// An update that leaves every value as it was still writes a row.
	exec(`INSERT INTO holds (job_id, buyer_id, amount_cents, status, created_at) VALUES ($1, $2, 10, 'held', $3)`, jobID, buyerID, t0)
	require.Empty(t, audit("hold back", 2, read))
	exec(`UPDATE devices SET slots_total = slots_total`)
	require.Empty(t, audit("device rewritten", 2, read))

	// A change in any table the checks read is seen, the journal's too.
	exec(`INSERT INTO job_events (kind, job_id, from_status, to_status, actor, at) VALUES ('job', $1, 'queued', 'active', 'matcher', $2)`, jobID, t0)
	require.Equal(t, []int{4}, audit("journal row with no transition behind it", 2, read))

	// The whole projection is always read; the checks only when written.
	s.Whole = true
	require.Equal(t, []int{4}, audit("whole, nothing written", 1, read))
	exec(`UPDATE jobs SET max_attempts = max_attempts`)
	require.Equal(t, []int{4}, audit("whole, a job rewritten", 2, read))
	s.Whole = false

	s.ExpectWrites = true
	require.Equal(t, []int{4}, audit("expecting writes, none made", 1, read), "the same result, evaluated")
	exec(`DELETE FROM job_events WHERE from_status = 'queued'`)
	require.Empty(t, audit("expecting writes, one made", 1, read))
}

// TestAuditRereadsStoredBytesWhenNoRowChanges: with no row written, Audit
// reads no rows but still hashes every succeeded job's stored output, since
// a file can change without a row.
func TestAuditRereadsStoredBytesWhenNoRowChanges(t *testing.T) {
	t.Parallel()
	pool := poolWithLeasedAttempt(t)
	st, err := artifact.NewFSUnsynced(t.TempDir())
	require.NoError(t, err)
	ctx := context.Background()
	key := "outputs/" + jobID + "/" + attemptA1 + ".mp4"
	obj, err := st.Put(ctx, key, strings.NewReader("rendered"))
	require.NoError(t, err)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`UPDATE job_attempts SET status = 'downloading' WHERE job_id = $1`, nil},
		{`UPDATE job_attempts SET status = 'uploading' WHERE job_id = $1`, nil},
		{`UPDATE job_attempts SET status = 'committing', claimed_output_key = $2, claimed_output_bytes = $3,
		  claimed_output_sha256 = $4 WHERE job_id = $1`, []any{key, obj.Bytes, obj.SHA256}},
		{`UPDATE job_attempts SET status = 'succeeded', ended_at = lease_expires_at WHERE job_id = $1`, nil},
		{`UPDATE jobs SET status = 'active' WHERE id = $1`, nil},
		{`UPDATE jobs SET status = 'verifying' WHERE id = $1`, nil},
		{`UPDATE jobs SET status = 'succeeded', output_key = $2, output_bytes = $3, output_sha256 = $4,
		  succeeded_attempt_id = (SELECT id FROM job_attempts WHERE job_id = $1) WHERE id = $1`, []any{key, obj.Bytes, obj.SHA256}},
	} {
		_, err := pool.Exec(ctx, q.sql, append([]any{jobID}, q.args...)...)
		require.NoError(t, err, q.sql)
	}
	var s store.Scope
	stored := func(what string, unchanged bool) []string {
		t.Helper()
		vs, _, got, err := store.Audit(ctx, pool, st, &s)
		require.NoError(t, err, what)
		require.Equal(t, unchanged, got, what)
		var out []string
		for _, v := range vs {
			if v.Invariant == store.OutputInvariant {
				out = append(out, v.Message)
			}
		}
		return out
	}
	require.Empty(t, stored("first audit", false))
	require.Empty(t, stored("nothing written", true))
	_, err = st.Put(ctx, key, strings.NewReader("tampered"))
	require.NoError(t, err)
	require.Len(t, stored("object changed, no row", true), 1)
	require.NoError(t, st.Delete(ctx, key))
	require.Len(t, stored("object gone, no row", true), 1)
}

// TestAuditProjectsWhatSnapshotDoes checks Audit's projection against
// Snapshot's, whole and scoped to a named job.
func TestAuditProjectsWhatSnapshotDoes(t *testing.T) {
	t.Parallel()
	pool, st := auditedQueuedJob(t)
	ctx := context.Background()
	want, err := store.Snapshot(ctx, pool)
	require.NoError(t, err)
	_, got, _, err := store.Audit(ctx, pool, st, &store.Scope{Whole: true})
	require.NoError(t, err)
	require.Equal(t, want, got)
	s := store.Scope{}
	_, got, _, err = store.Audit(ctx, pool, st, &s)
	require.NoError(t, err)
	require.Equal(t, want, got, "the first scoped audit takes every job")
	// Nothing is written from here on: asking for the projection anyway.
	s.Jobs, s.ExpectWrites = []string{jobID}, true
	_, got, _, err = store.Audit(ctx, pool, st, &s)
	require.NoError(t, err)
	require.Equal(t, want.Jobs, got.Jobs, "the named job, unwritten")
	s.Jobs, s.JournalFrom = nil, 1
	_, got, _, err = store.Audit(ctx, pool, st, &s)
	require.NoError(t, err)
	require.Equal(t, protocol.Snapshot{Buyers: want.Buyers, Devices: want.Devices}, got, "nothing named or written, the journal from its end")
}
