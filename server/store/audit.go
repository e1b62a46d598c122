package store

import (
	"context"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
)

// Audit is CheckInvariants, then CheckOutputs, and a projection of the rows
// (Snapshot's whole one when s.Whole is set, else the rows s selects): what
// a differential harness reads after every step. The violations are in the
// order the two checks give.
//
// CheckInvariants' SQL checks and the projection are functions of the rows
// of the tables they read (invariantTables) alone. So when none of those
// rows was inserted, updated or deleted since the previous Audit with s,
// the checks' result is the one the last evaluation with s gave, and Audit
// returns that without evaluating them again; and the projection is the
// one the previous Audit read, so unless s.Whole or s.ExpectWrites asks for
// it, Audit reads none and says so (unchanged, with an empty projection).
// Every Audit reads whether rows were written. With s.ExpectWrites set (or
// no last result), it evaluates the checks and reads the projection in the
// same round trip; with s.Whole, it reads the projection in that round trip
// and evaluates the checks in a second one only when rows were written;
// otherwise that one read is the first round trip, and only when rows were
// written does a second read the projection and evaluate the checks.
// CheckOutputs, which re-reads stored bytes that can change without a row,
// runs every time (over the rows the last read found, when none changed).
//
// "Written since" is a row's xmin against the previous Audit's mark (see
// Scope), and "deleted" the tables' total row count: when no row was
// written since, none was inserted or updated, so an unchanged total means
// none was deleted either.
func Audit(ctx context.Context, q Querier, st artifact.Store, s *Scope) (vs []protocol.Violation, snap protocol.Snapshot, unchanged bool, err error) {
	since, last := s.mark, s.held
	s.held = nil
	var w written
	// The mark is first: a write racing the later reads counts as written
	// next time.
	reads := []read{w.read(since, &s.mark)}
	eval := last == nil || s.ExpectWrites
	if !eval && !s.Whole {
		if err := readAll(ctx, q, reads); err != nil {
			return nil, snap, false, err
		}
		if !w.since(since, s.mark, last.rows) {
			s.held = last
			if vs, err = last.withStored(ctx, st); err != nil {
				return nil, snap, false, err
			}
			return vs, snap, true, nil
		}
		reads, eval = nil, true
	}
	var outs []recordedOutput
	reads = append(reads, outputsRead(&outs))
	if s.Whole {
		reads = append(reads, snapshotReads(&snap)...)
	} else {
		reads = append(reads, s.reads(&snap, since)...)
	}
	var j journalRows
	if eval {
		reads = append(reads, invariantReads(&vs, &j)...)
	}
	if err := readAll(ctx, q, reads); err != nil {
		return nil, snap, false, err
	}
	switch {
	case eval:
		vs = append(vs, j.violations()...)
	case w.since(since, s.mark, last.rows):
		if vs, err = CheckInvariants(ctx, q); err != nil {
			return nil, snap, false, err
		}
	default:
		vs = last.violations
	}
	s.held = &heldChecks{rows: w.rows, violations: vs, outputs: outs}
	if vs, err = s.held.withStored(ctx, st); err != nil {
		return nil, snap, false, err
	}
	return vs, snap, false, nil
}

// Scope is the state an Audit keeps for the next, and selects the rows one
// step could have touched: the jobs named in Jobs, and every job whose own
// row, hold, attempts or webhooks were inserted or updated since the
// previous Audit with the same Scope (every job on the first), each with
// all its attempts; every buyer and device (a handful, each a sum over
// other tables); and the journal rows from index JournalFrom on.
//
// "Written since" is the rows' xmin against the mark, the transactions the
// previous Audit's snapshot saw as ended: a row inserted or updated by any
// other transaction, whoever ran it, has an xmin at or past the snapshot's
// xmax or among the transactions it saw running. Other databases' running
// transactions do not widen the set, as an xid horizon would. Rows are
// never deleted from these tables by the service layer; a delete (which
// leaves no xmin) shows in the whole projection a harness compares every K
// steps and at the end, since a deleted row stays deleted until a write,
// which is seen.
type Scope struct {
	Jobs        []string
	JournalFrom int
	// Whole asks for Snapshot's whole projection instead of the scope's.
	Whole bool
	// ExpectWrites says the caller expects rows were written since the
	// previous Audit, so that reading the projection and evaluating the
	// checks in the first round trip saves one. Without it (and without
	// Whole), an Audit that finds no row written reads no projection and
	// reports it unchanged: the caller must then know its own expectation
	// of the rows unchanged too.
	ExpectWrites bool
	// mark is the previous Audit's snapshot (zero: none yet, every row is
	// written since).
	mark mark
	// held is CheckInvariants' last result, the tables' total row count at
	// the mark it was evaluated after and the outputs the rows recorded
	// (nil: none yet, or the last Audit failed).
	held *heldChecks
}

// mark is a snapshot's 64-bit xmin and xmax and the xids it saw running.
type mark struct {
	xmin, xmax int64
	xip        []int64
}

// args are writtenSince's $2, $3 and $4 for m. A row's xmin is 32 bits, so
// they compare within m.xmin's epoch.
func (m mark) args() []any {
	xip := make([]int64, len(m.xip))
	for i, x := range m.xip {
		xip[i] = x & 0xffffffff
	}
	return []any{m.xmax & 0xffffffff, m.xmin >> 32, xip}
}

// writtenSince is true of a row written since the mark: its xmin at or past
// the mark's xmax ($2, low 32 bits) or among the xids it saw running ($4,
// low 32 bits). When the next xid is no longer in the epoch of the mark's
// xmin ($3), 32-bit xids do not compare, and every row counts as written.
const writtenSince = `(%s.xmin::text::bigint >= $2 OR %s.xmin::text::bigint = ANY($4::bigint[])
      OR (pg_snapshot_xmax(pg_current_snapshot())::text::bigint >> 32) <> $3)`

func writtenSinceFor(alias string) string { return strings.ReplaceAll(writtenSince, "%s", alias) }

type heldChecks struct {
	rows       int64 // in invariantTables
	violations []protocol.Violation
	outputs    []recordedOutput // the stored outputs the rows record
}

// withStored is h's violations followed by CheckOutputs' over the stored
// bytes of the outputs h's rows record, read now.
func (h *heldChecks) withStored(ctx context.Context, st artifact.Store) ([]protocol.Violation, error) {
	stored, err := verifyOutputs(ctx, st, h.outputs)
	if err != nil {
		return nil, err
	}
	return append(slices.Clip(h.violations), stored...), nil
}

// invariantTables are the tables CheckInvariants reads
// (TestInvariantTablesCoverTheChecks holds the list to its statements).
var invariantTables = [...]string{"jobs", "job_attempts", "job_events", "holds", "webhook_outbox", "buyers", "devices",
	"pruned_captures"}

// sqlWritten reads the statement's own snapshot as the next mark, and
// counts the rows of every invariantTables table and those of them written
// since the previous mark ($1 its xmax's, $2 its running xids' low 32
// bits). Counting all tables at once is enough: when no row was written
// since, none was inserted in any table, so an unchanged total means none
// was deleted from any either. One aggregate over one scan per table, as
// few plan nodes as the question allows (each costs executor start-up).
var sqlWritten = func() string {
	scans := make([]string, len(invariantTables))
	for i, t := range invariantTables {
		scans[i] = "SELECT xmin::text::bigint FROM " + t
	}
	return `SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint,
       ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(s) x), w.n, w.fresh
FROM pg_current_snapshot() s,
     (SELECT count(*) n, count(*) FILTER (WHERE x >= $1 OR x = ANY($2::bigint[])) fresh
      FROM (` + strings.Join(scans, "\n            UNION ALL ") + `) t(x)) w`
}()

// written is what sqlWritten read besides the mark.
type written struct{ rows, fresh int64 }

func (w *written) read(since mark, next *mark) read {
	args := since.args()
	return read{what: "rows written since the last audit", sql: sqlWritten, args: []any{args[0], args[2]},
		row: func(r pgx.Rows) error {
			return r.Scan(&next.xmin, &next.xmax, &next.xip, &w.rows, &w.fresh)
		}}
}

// since is true when a row may have been written or deleted between mark
// m, at which the tables held rows rows in all, and mark now (the one
// sqlWritten read). Every xid assigned in between is below now.xmax; when
// they are not all in the epoch of m's xmin, 32-bit xmins do not compare,
// and every row counts as written.
func (w *written) since(m, now mark, rows int64) bool {
	return w.fresh > 0 || w.rows != rows || now.xmax>>32 != m.xmin>>32
}

// sqlTouchedJobs is the WHERE clause over jobs j selecting Scope's jobs ($1
// their ids).
var sqlTouchedJobs = "j.id = ANY($1::uuid[]) OR " + writtenSinceFor("j") + `
   OR EXISTS (SELECT 1 FROM holds h WHERE h.job_id = j.id AND ` + writtenSinceFor("h") + `)
   OR EXISTS (SELECT 1 FROM job_attempts a WHERE a.job_id = j.id AND ` + writtenSinceFor("a") + `)
   OR EXISTS (SELECT 1 FROM webhook_outbox w WHERE w.job_id = j.id AND ` + writtenSinceFor("w") + `)`

// The scoped projections: Snapshot's statements with sqlTouchedJobs added
// (the attempts statement joins jobs j too), and the journal from an offset.
var (
	sqlScopedJobs     = strings.Replace(sqlSnapshotJobs, "\nORDER BY", "\nWHERE "+sqlTouchedJobs+"\nORDER BY", 1)
	sqlScopedAttempts = strings.Replace(sqlSnapshotAttempts, "\nORDER BY", "\nWHERE "+sqlTouchedJobs+"\nORDER BY", 1)
	sqlScopedJournal  = sqlSnapshotJournal + " OFFSET $1"
)

// reads are the scoped projection's statements for the previous mark.
func (s *Scope) reads(snap *protocol.Snapshot, m mark) []read {
	ids := make([]string, 0, len(s.Jobs))
	for _, id := range s.Jobs {
		if protocol.ValidID(id) {
			ids = append(ids, id)
		}
	}
	args := append([]any{ids}, m.args()...)
	all := snapshotReads(snap)
	return []read{
		{what: "snapshot jobs", sql: sqlScopedJobs, args: args, row: all[0].row},
		{what: "snapshot attempts", sql: sqlScopedAttempts, args: args, row: all[1].row},
		all[2], all[3],
		{what: "snapshot journal", sql: sqlScopedJournal, args: []any{s.JournalFrom}, row: all[4].row},
	}
}
