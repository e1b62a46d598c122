package store

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
)

// Audit is CheckInvariants, then CheckOutputs, and a projection of the rows
// (Snapshot's whole one when scope is nil, else ScopedSnapshot's) read in
// one round trip when q can pipeline: what a differential harness reads
// after every step. The violations are in the order the two checks give.
func Audit(ctx context.Context, q Querier, st artifact.Store, scope *Scope) ([]protocol.Violation, protocol.Snapshot, error) {
	var vs []protocol.Violation
	var j journalRows
	var outs []recordedOutput
	var snap protocol.Snapshot
	reads := append(invariantReads(&vs, &j), outputsRead(&outs))
	if scope == nil {
		reads = append(reads, snapshotReads(&snap)...)
	} else {
		reads = append(reads, scope.reads(&snap)...)
	}
	if err := readAll(ctx, q, reads); err != nil {
		return nil, snap, err
	}
	vs = append(vs, j.violations()...)
	stored, err := verifyOutputs(ctx, st, outs)
	if err != nil {
		return nil, snap, err
	}
	return append(vs, stored...), snap, nil
}

// Scope selects the rows one step could have touched, for ScopedSnapshot:
// the jobs named in Jobs, and every job whose own row, hold, attempts or
// webhooks were inserted or updated since the previous scoped read with the
// same Scope (every job on the first), each with all its attempts; every
// buyer and device (a handful, each a sum over other tables); and the
// journal rows from index JournalFrom on.
//
// "Written since" is the rows' xmin: a row inserted or updated by a
// transaction that had not ended when the previous read took its mark (the
// oldest transaction then running) has an xmin at or past the mark. So the
// set is a superset of what any transaction wrote in between, whoever ran
// it. Rows are never deleted from these tables by the service layer; a
// delete (which leaves no xmin) shows in the whole projection a harness
// compares every K steps and at the end, since a deleted row stays deleted
// until a write, which is seen.
type Scope struct {
	Jobs        []string
	JournalFrom int
	// mark is the previous read's xid horizon (0: none yet).
	mark int64
}

// ScopedSnapshot projects the rows s selects, in Snapshot's order, and
// moves s's mark to now. Snapshot.Journal holds only the rows from
// s.JournalFrom on.
func ScopedSnapshot(ctx context.Context, q Querier, s *Scope) (protocol.Snapshot, error) {
	var snap protocol.Snapshot
	err := readAll(ctx, q, s.reads(&snap))
	return snap, err
}

// writtenSince is true of a row whose xmin is at or past the mark ($2, the
// low 32 bits of the 64-bit horizon); when the xid epoch ($3) has moved on
// since, 32-bit xids no longer compare, and every row counts as written.
const writtenSince = `(%s.xmin::text::bigint >= $2 OR (pg_snapshot_xmin(pg_current_snapshot())::text::bigint >> 32) <> $3)`

// sqlTouchedJobs is the WHERE clause over jobs j selecting Scope's jobs ($1
// their ids).
var sqlTouchedJobs = "j.id = ANY($1::uuid[]) OR " + strings.ReplaceAll(writtenSince, "%s", "j") + `
   OR EXISTS (SELECT 1 FROM holds h WHERE h.job_id = j.id AND ` + strings.ReplaceAll(writtenSince, "%s", "h") + `)
   OR EXISTS (SELECT 1 FROM job_attempts a WHERE a.job_id = j.id AND ` + strings.ReplaceAll(writtenSince, "%s", "a") + `)
   OR EXISTS (SELECT 1 FROM webhook_outbox w WHERE w.job_id = j.id AND ` + strings.ReplaceAll(writtenSince, "%s", "w") + `)`

// The scoped projections: Snapshot's statements with sqlTouchedJobs added
// (the attempts statement joins jobs j too), and the journal from an offset.
var (
	sqlScopedJobs     = strings.Replace(sqlSnapshotJobs, "\nORDER BY", "\nWHERE "+sqlTouchedJobs+"\nORDER BY", 1)
	sqlScopedAttempts = strings.Replace(sqlSnapshotAttempts, "\nORDER BY", "\nWHERE "+sqlTouchedJobs+"\nORDER BY", 1)
	sqlScopedJournal  = sqlSnapshotJournal + " OFFSET $1"
)

// sqlHorizon is the mark: the oldest transaction id still running, or the
// next one to be assigned when none is.
const sqlHorizon = `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint`

func (s *Scope) reads(snap *protocol.Snapshot) []read {
	ids := make([]string, 0, len(s.Jobs))
	for _, id := range s.Jobs {
		if protocol.ValidID(id) {
			ids = append(ids, id)
		}
	}
	mark := s.mark
	all := snapshotReads(snap)
	return []read{
		// Taken first, so a write racing this read counts as written next time.
		{what: "scoped snapshot mark", sql: sqlHorizon, row: func(r pgx.Rows) error { return r.Scan(&s.mark) }},
		{what: "snapshot jobs", sql: sqlScopedJobs, args: []any{ids, mark & 0xffffffff, mark >> 32}, row: all[0].row},
		{what: "snapshot attempts", sql: sqlScopedAttempts, args: []any{ids, mark & 0xffffffff, mark >> 32}, row: all[1].row},
		all[2], all[3],
		{what: "snapshot journal", sql: sqlScopedJournal, args: []any{s.JournalFrom}, row: all[4].row},
	}
}
