package fencing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/fencing"
)

// A fenced write that hits no row, or two, fails its transaction in
// Postgres: the COMMIT queued behind it in the same round trip never runs,
// so the writes before it are rolled back, and the error is ErrInternal
// naming the write. The connection goes back to the pool usable.
func TestFencedWriteOffByOneCommitsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	ctx := context.Background()
	credit := fencing.TestWrite{What: "credit buyer", SQL: `UPDATE buyers SET balance_cents = balance_cents + 1 WHERE id = $1`,
		Args: []any{buyerID}}
	for _, tc := range []struct {
		what string
		sql  string
		args []any
		rows int
	}{
		{"move missing job", `UPDATE jobs SET updated_at = $2 WHERE id = $1`, []any{missingID, t0}, 0},
		{"touch every buyer", `UPDATE buyers SET name = name WHERE balance_cents >= $1`, []any{0}, 2},
		// A write behind data-modifying CTEs is fenced on its own count.
		{"settle missing hold", `WITH h AS (UPDATE holds SET status = 'released' WHERE job_id = $1 AND status = 'held' RETURNING buyer_id)
UPDATE buyers x SET name = x.name FROM h WHERE x.id = h.buyer_id`, []any{missingID}, 0},
	} {
		err := b.svc.PipelinedWritesForTest(ctx, t0, credit, fencing.TestWrite{What: tc.what, One: true, SQL: tc.sql, Args: tc.args})
		require.ErrorIs(t, err, fencing.ErrInternal, tc.what)
		require.ErrorContains(t, err, tc.what+": fence matched "+map[int]string{0: "0", 2: "2"}[tc.rows]+" rows")
		var bal int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT balance_cents FROM buyers WHERE id = $1`, buyerID).Scan(&bal))
		require.Equal(t, int64(balance), bal, "%s: the credit before the refused write was committed", tc.what)
	}
	// The same transaction with a write that hits one row commits both.
	require.NoError(t, b.svc.PipelinedWritesForTest(ctx, t0, credit, fencing.TestWrite{What: "touch buyer", One: true,
		SQL: `UPDATE buyers SET name = name WHERE id = $1`, Args: []any{buyerID}}))
	var bal int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT balance_cents FROM buyers WHERE id = $1`, buyerID).Scan(&bal))
	require.Equal(t, int64(balance+1), bal)
	require.NoError(t, b.svc.PipelinedWritesForTest(ctx, t0, fencing.TestWrite{What: "debit back", SQL: `UPDATE buyers SET balance_cents = balance_cents - 1 WHERE id = $1`,
		Args: []any{buyerID}}))
}
