package targets

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/server/fencing"
)

// TestEmptyAllLeavesNothingOfARun holds tableEmptier to what the campaigns
// rely on, on both of its paths (the deletes, and every truncateEvery-th
// run the truncate): after a run's rows, every table but goose's is empty
// and every sequence starts again at 1.
func TestEmptyAllLeavesNothingOfARun(t *testing.T) {
	ctx := context.Background()
	w, err := NewPostgresWorkers(ctx, 1, fencing.VariantNone, sharedPG(t).NewDatabase)
	require.NoError(t, err)
	defer w.Close()
	c := fuzz.Campaign{Factory: w.Factory(""), Gen: fuzz.DefaultGenConfig, Steps: 60, Workers: 1,
		Options: fuzz.Options{Outputs: SyntheticOutput}}
	r, err := w.resources(ctx, 0)
	require.NoError(t, err)
	// Start the count just short of a truncate, so that three runs take
	// both paths (the first and third empty by deleting, the second by
	// truncating).
	r.emptier.runs = truncateEvery - 2
	paths := map[bool]int{}
	for i := range 3 {
		c.Seeds = []uint64{uint64(1 + i)}
		res, err := c.Run(ctx) // empties once, then leaves the run's rows
		require.NoError(t, err)
		require.Empty(t, res.Failures)
		require.NotZero(t, rowsLeft(t, r.pool.QueryRow, "job_events"), "the run left no journal to empty")
		truncating := (r.emptier.runs+1)%truncateEvery == 0
		require.NoError(t, r.emptier.emptyAll(ctx, r.pool))
		paths[truncating]++

		var tables []string
		rows, err := r.pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'goose_db_version'`)
		require.NoError(t, err)
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Contains(t, tables, "jobs")
		for _, tbl := range tables {
			require.Zero(t, rowsLeft(t, r.pool.QueryRow, tbl), "table %s after emptyAll (truncate=%v)", tbl, truncating)
		}
		rows, err = r.pool.Query(ctx, `SELECT sequencename FROM pg_sequences
		  WHERE schemaname = 'public' AND sequencename <> 'goose_db_version_id_seq'`)
		require.NoError(t, err)
		seqs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.NotEmpty(t, seqs)
		for _, name := range seqs {
			var last int64
			var called bool
			require.NoError(t, r.pool.QueryRow(ctx, "SELECT last_value, is_called FROM "+pgx.Identifier{name}.Sanitize()).Scan(&last, &called))
			require.Equal(t, []any{int64(1), false}, []any{last, called}, "sequence %s after emptyAll (truncate=%v): its next value is not 1", name, truncating)
		}
	}
	require.Positive(t, paths[false], "the deletes never ran")
	require.Positive(t, paths[true], "the truncate never ran")
}

func rowsLeft(t *testing.T, queryRow func(context.Context, string, ...any) pgx.Row, table string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, queryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&n))
	return n
}
