package fencing

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
)

// A write that must hit exactly one row (a fence, step.write's one) is
// sent as fenced(sql): Postgres counts the rows it hit and refuses the
// transaction, with SQLSTATE sqlStateFence, when that is not one
// (rendermac_fence_one, migration 00008). The check is the database's
// rather than Go's on the command tag so that a pipelined transaction can
// queue its COMMIT behind its writes, in their round trip: a pipeline
// skips every statement after an error, the COMMIT too.
const sqlStateFence = "RMF01"

// fencedSQL caches fenced's rewrites: the writes are a handful of
// constants, and the same text lets pgx reuse the prepared statement.
var fencedSQL sync.Map // sql -> fenced text

// fenced is the write sql (one statement, possibly behind data-modifying
// CTEs, with no RETURNING of its own) rewritten to return nothing and raise
// unless it hit exactly one row; $what is the parameter that names the
// write in the error.
func fenced(sql string, what int) string {
	if f, ok := fencedSQL.Load(sql); ok {
		return f.(string)
	}
	with, write := splitWith(strings.TrimSpace(sql))
	f := fmt.Sprintf("WITH %sfenced AS (\n%s\nRETURNING 1)\nSELECT rendermac_fence_one(count(*), $%d) FROM fenced",
		with, write, what)
	fencedSQL.Store(sql, f)
	return f
}

// splitWith splits a statement that starts with WITH into its CTE list,
// ending with a comma, and the statement after it. It counts parentheses,
// which is enough for the service's writes: none has one in a string
// literal or a comment.
func splitWith(sql string) (ctes, rest string) {
	const with = "WITH "
	if !strings.HasPrefix(sql, with) {
		return "", sql
	}
	depth := 0
	for i, c := range sql {
		switch c {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				after := strings.TrimLeft(sql[i+1:], " \t\n")
				if !strings.HasPrefix(after, ",") {
					return sql[len(with):i+1] + ",\n", after
				}
			}
		}
	}
	return "", sql // unbalanced: Postgres will say what is wrong
}

// fenceError turns Postgres's refusal of a fenced write into ErrInternal,
// as the check in Go did: the locks make it impossible.
func fenceError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == sqlStateFence {
		return internalf("%s", pe.Message)
	}
	return err
}
