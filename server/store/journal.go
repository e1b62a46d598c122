package store

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
)

const (
	// sqlJournalEntries lists every journal row with the entity it is about:
	// the job for job rows, the attempt for attempt rows.
	sqlJournalEntries = `
SELECT id, kind, coalesce(attempt_id, job_id)::text, job_id::text, coalesce(from_status, ''), to_status
FROM job_events ORDER BY id`

	// sqlJournalSubjects lists every job and attempt with its current status.
	sqlJournalSubjects = `
SELECT 'job', id::text, id::text, status FROM jobs
UNION ALL
SELECT 'attempt', id::text, job_id::text, status FROM job_attempts`
)

type journalEntry struct {
	id                int64
	kind, entity, job string
	from, to          string
}

type journalSubject struct {
	kind, entity, job, status string
}

// journalRows are what invariant 4 is checked over: every journal row and
// every job and attempt with its current status.
type journalRows struct {
	entries  []journalEntry
	subjects []journalSubject
}

func (j *journalRows) reads() []read {
	return []read{
		{what: "check invariant 4", sql: sqlJournalEntries, row: into(&j.entries, func(r pgx.Row) (journalEntry, error) {
			var e journalEntry
			return e, r.Scan(&e.id, &e.kind, &e.entity, &e.job, &e.from, &e.to)
		})},
		{what: "check invariant 4", sql: sqlJournalSubjects, row: into(&j.subjects, func(r pgx.Row) (journalSubject, error) {
			var s journalSubject
			return s, r.Scan(&s.kind, &s.entity, &s.job, &s.status)
		})},
	}
}

// violations is invariant 4: every journal row's (from, to) is allowed by
// the protocol tables, each entity's rows form one chain from its insert
// (null -> queued for a job, null -> leased for an attempt), and replaying
// the chain ends at the entity's current status.
func (j *journalRows) violations() []protocol.Violation {
	entries, subjects := j.entries, j.subjects
	var out []protocol.Violation
	bad := func(format string, args ...any) {
		out = append(out, protocol.Violation{Invariant: 4, Message: fmt.Sprintf(format, args...)})
	}
	replayed := map[string]string{} // entity -> status after its last row
	for _, e := range entries {
		last, seen := replayed[e.kind+e.entity]
		switch {
		case !seen && e.from != "":
			bad("%s %s: first journal row %d is %s -> %s, not an insert", e.kind, e.entity, e.id, e.from, e.to)
		case !seen && e.to != initialStatus(e.kind):
			bad("%s %s: inserted as %s (row %d)", e.kind, e.entity, e.to, e.id)
		case seen && e.from != last:
			bad("%s %s: row %d starts from %q but the chain is at %q", e.kind, e.entity, e.id, e.from, last)
		case seen:
			if err := assertTransition(e.kind, e.from, e.to); err != nil {
				bad("%s %s: row %d: %v", e.kind, e.entity, e.id, err)
			}
		}
		replayed[e.kind+e.entity] = e.to
	}
	for _, s := range subjects {
		if got, ok := replayed[s.kind+s.entity]; !ok || got != s.status {
			bad("%s %s (job %s) is %s but its journal replays to %q", s.kind, s.entity, s.job, s.status, got)
		}
	}
	return out
}

func initialStatus(kind string) string {
	if kind == "job" {
		return string(protocol.JobQueued)
	}
	return string(protocol.AttemptLeased)
}

func assertTransition(kind, from, to string) error {
	if kind == "job" {
		return protocol.AssertJobTransition(protocol.JobStatus(from), protocol.JobStatus(to))
	}
	return protocol.AssertAttemptTransition(protocol.AttemptStatus(from), protocol.AttemptStatus(to))
}

func scanString(r pgx.Row) (string, error) {
	var s string
	return s, r.Scan(&s)
}
