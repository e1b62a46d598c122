// Package dbstat counts the database work of a process by operation:
// transactions, statements inside and outside them, and round trips. The
// counts are measured, not estimated: a pgx tracer on the pool (see
// store.PoolConfig) sees every BEGIN, COMMIT, statement and batch, and
// files it under the operation name its context carries (WithOp), or under
// Unlabelled. `rendermac bench` reads them (through /metrics) to print the
// per-job transaction and statement counts of the happy path.
package dbstat

import (
	"context"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Unlabelled is the operation of work whose context names none.
const Unlabelled = "unlabelled"

type opKey struct{}

// WithOp returns ctx naming op as the operation its database work is
// counted under. An inner WithOp wins.
func WithOp(ctx context.Context, op string) context.Context {
	return context.WithValue(ctx, opKey{}, op)
}

// Op is the operation ctx names, or Unlabelled.
func Op(ctx context.Context) string {
	if op, ok := ctx.Value(opKey{}).(string); ok && op != "" {
		return op
	}
	return Unlabelled
}

// Counts is the database work of one operation.
type Counts struct {
	// Transactions counts BEGINs; Commits and Rollbacks how they ended.
	Transactions, Commits, Rollbacks int64
	// InTx counts statements sent inside a transaction (BEGIN, COMMIT and
	// ROLLBACK not included); Outside those sent with no transaction open
	// (each its own implicit transaction).
	InTx, Outside int64
	// RoundTrips counts client -> server -> client exchanges: one per
	// statement, BEGIN and COMMIT sent alone, one per batch however many
	// statements it pipelines.
	RoundTrips int64
}

// Add returns c + o.
func (c Counts) Add(o Counts) Counts {
	return Counts{c.Transactions + o.Transactions, c.Commits + o.Commits, c.Rollbacks + o.Rollbacks,
		c.InTx + o.InTx, c.Outside + o.Outside, c.RoundTrips + o.RoundTrips}
}

// Sub returns c - o.
func (c Counts) Sub(o Counts) Counts {
	return Counts{c.Transactions - o.Transactions, c.Commits - o.Commits, c.Rollbacks - o.Rollbacks,
		c.InTx - o.InTx, c.Outside - o.Outside, c.RoundTrips - o.RoundTrips}
}

// Counter is the tally of one pool. It is safe for concurrent use; the
// zero value is ready.
type Counter struct {
	mu   sync.Mutex
	byOp map[string]*Counts
	// open is the operation of each connection's open transaction (the
	// context of its BEGIN): a statement inside it whose own context names
	// no operation is counted under it.
	open map[*pgx.Conn]string
}

// Snapshot returns a copy of the counts by operation.
func (c *Counter) Snapshot() map[string]Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]Counts, len(c.byOp))
	for op, v := range c.byOp {
		out[op] = *v
	}
	return out
}

// add files f's counts under ctx's operation, or else under that of
// conn's open transaction. kind is the statement's control word ("" for
// an ordinary statement): a BEGIN opens conn's transaction, a COMMIT or
// ROLLBACK closes it.
func (c *Counter) add(ctx context.Context, conn *pgx.Conn, kind string, f func(*Counts)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byOp == nil {
		c.byOp, c.open = map[string]*Counts{}, map[*pgx.Conn]string{}
	}
	op := Op(ctx)
	switch kind {
	case "begin":
		c.open[conn] = op
	case "commit", "rollback":
		if txOp, ok := c.open[conn]; ok && op == Unlabelled {
			op = txOp
		}
		delete(c.open, conn)
	default:
		if txOp, ok := c.open[conn]; ok && op == Unlabelled {
			op = txOp
		}
	}
	v := c.byOp[op]
	if v == nil {
		v = &Counts{}
		c.byOp[op] = v
	}
	f(v)
}

// control classifies a statement as a transaction control statement. It
// runs for every statement the pool sends, so it looks only at the first
// word rather than lowercasing the whole text (which showed in profiles).
func control(sql string) string {
	s := strings.TrimSpace(sql)
	for _, w := range [...]string{"begin", "commit", "rollback"} {
		if len(s) >= len(w) && strings.EqualFold(s[:len(w)], w) &&
			(len(s) == len(w) || s[len(w)] == ' ' || s[len(w)] == ';') {
			return w
		}
	}
	return ""
}

// statement counts one statement of kind (control's answer) sent while a
// transaction was open or not, and says whether one is open after it.
func (v *Counts) statement(kind string, open bool) bool {
	switch kind {
	case "begin":
		v.Transactions++
		return true
	case "commit":
		v.Commits++
		return false
	case "rollback":
		v.Rollbacks++
		return false
	}
	if open {
		v.InTx++
	} else {
		v.Outside++
	}
	return open
}

// inTx reports whether conn has a transaction open (or failed) right now.
func inTx(conn *pgx.Conn) bool {
	switch conn.PgConn().TxStatus() {
	case 'T', 'E':
		return true
	}
	return false
}

// TraceQueryStart counts one statement sent alone (Exec, Query, QueryRow),
// BEGIN, COMMIT and ROLLBACK included.
func (c *Counter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	open := inTx(conn)
	kind := control(data.SQL)
	c.add(ctx, conn, kind, func(v *Counts) {
		v.RoundTrips++
		v.statement(kind, open)
	})
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *Counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts one batch: one round trip, and each statement in
// it: a BEGIN queued first (pgx.Batch.BeginTx) opens a transaction the
// statements after it are inside of; statements sent with no transaction
// open run as one implicit transaction and count as outside.
func (c *Counter) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	open := inTx(conn)
	first := true
	for _, q := range data.Batch.QueuedQueries {
		kind := control(q.SQL)
		c.add(ctx, conn, kind, func(v *Counts) {
			if first {
				v.RoundTrips++
				first = false
			}
			open = v.statement(kind, open)
		})
	}
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *Counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *Counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
