package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/server/store"
)

// TestDBCounter checks the pool tracer's tally against work whose shape is
// known: a transaction of two statements and a two-statement batch, under
// one operation named only on BEGIN's context; a lone statement; and a
// batch outside any transaction.
func TestDBCounter(t *testing.T) {
	pool := newPool(t)
	c := store.DBCounter(pool)
	require.NotNil(t, c)
	bg := context.Background()
	before := c.Snapshot()

	err := pgx.BeginTxFunc(dbstat.WithOp(bg, "op_tx"), pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(bg, `SELECT 1`).Scan(&n); err != nil {
			return err
		}
		if _, err := tx.Exec(bg, `SELECT 2`); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(`SELECT 3`)
		b.Queue(`SELECT 4`)
		return tx.SendBatch(bg, b).Close()
	})
	require.NoError(t, err)
	_, err = pool.Exec(dbstat.WithOp(bg, "op_alone"), `SELECT 5`)
	require.NoError(t, err)
	b := &pgx.Batch{}
	b.Queue(`SELECT 6`)
	b.Queue(`SELECT 7`)
	b.Queue(`SELECT 8`)
	require.NoError(t, pool.SendBatch(dbstat.WithOp(bg, "op_batch"), b).Close())

	b = &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(`SELECT 9`)
	br := pool.SendBatch(dbstat.WithOp(bg, "op_begin_batch"), b)
	tx := br.Tx()
	require.NoError(t, br.Close())
	_, err = tx.Exec(bg, `SELECT 10`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(bg))

	got := diff(before, c.Snapshot())
	require.Equal(t, dbstat.Counts{Transactions: 1, Commits: 1, InTx: 2, RoundTrips: 3}, got["op_begin_batch"],
		"BEGIN pipelined with a statement, one more statement, COMMIT")
	require.Equal(t, dbstat.Counts{Transactions: 1, Commits: 1, InTx: 4, RoundTrips: 5}, got["op_tx"],
		"BEGIN, two statements, one batch of two, COMMIT")
	require.Equal(t, dbstat.Counts{Outside: 1, RoundTrips: 1}, got["op_alone"])
	require.Equal(t, dbstat.Counts{Outside: 3, RoundTrips: 1}, got["op_batch"])
	require.Zero(t, got[dbstat.Unlabelled], "nothing may fall outside the named operations")
}

func diff(before, after map[string]dbstat.Counts) map[string]dbstat.Counts {
	out := map[string]dbstat.Counts{}
	for op, a := range after {
		out[op] = a.Sub(before[op])
	}
	return out
}
