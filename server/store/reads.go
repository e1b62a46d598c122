package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// read is one statement of a set run together, and where its rows go.
type read struct {
	what string // for errors: "check invariant 3", "snapshot jobs"
	sql  string
	args []any
	row  func(pgx.Rows) error // called once per row
}

// into is a read's row function appending each scanned row to dst.
func into[T any](dst *[]T, scan func(pgx.Row) (T, error)) func(pgx.Rows) error {
	return func(r pgx.Rows) error {
		v, err := scan(r)
		if err != nil {
			return err
		}
		*dst = append(*dst, v)
		return nil
	}
}

// readAll runs reads in order. When q can pipeline (a batcher: a pool, a
// connection, a transaction), every statement goes
// in one round trip (a pgx batch: one implicit transaction, so a failing
// statement fails the rest); otherwise one statement at a time.
func readAll(ctx context.Context, q Querier, reads []read) error {
	b, ok := q.(batcher)
	if !ok {
		for _, r := range reads {
			rows, err := q.Query(ctx, r.sql, r.args...)
			if err := drain(r, rows, err); err != nil {
				return err
			}
		}
		return nil
	}
	var batch pgx.Batch
	for _, r := range reads {
		batch.Queue(r.sql, r.args...)
	}
	br := b.SendBatch(ctx, &batch)
	for _, r := range reads {
		rows, err := br.Query()
		if err := drain(r, rows, err); err != nil {
			_ = br.Close()
			return err
		}
	}
	return br.Close()
}

func drain(r read, rows pgx.Rows, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", r.what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := r.row(rows); err != nil {
			return fmt.Errorf("%s: %w", r.what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", r.what, err)
	}
	return nil
}
