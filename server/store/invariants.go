package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
)

// invariantCheck is one SQL check: every row it returns is one violation,
// rendered as a message by the query itself.
type invariantCheck struct {
	invariant int
	query     string
}

// invariantChecks are SPEC section 4 as SQL over the real rows. Invariant 4's
// table and replay checks are in Go (checkJournal), against the protocol
// package's transition tables rather than a second copy of them.
var invariantChecks = []invariantCheck{
	{1, `SELECT format('job %s has %s live attempts', job_id, count(*)) FROM job_attempts
	     WHERE status IN ` + SQLLiveStatuses + ` GROUP BY job_id HAVING count(*) > 1`},
	{1, `SELECT format('job %s: attempt_count %s but attempts numbered %s..%s (%s rows)',
	            j.id, j.attempt_count, a.lo, a.hi, coalesce(a.n, 0))
	     FROM jobs j LEFT JOIN (SELECT job_id, count(*) n, min(attempt_number) lo, max(attempt_number) hi
	                            FROM job_attempts GROUP BY job_id) a ON a.job_id = j.id
	     WHERE coalesce(a.n, 0) <> j.attempt_count OR (a.n > 0 AND (a.lo <> 1 OR a.hi <> a.n))`},
	{2, `SELECT format('job %s is %s but its live attempt is %s', j.id, j.status, coalesce(a.status, 'missing'))
	     FROM jobs j LEFT JOIN job_attempts a ON a.job_id = j.id AND a.status IN ` + SQLLiveStatuses + `
	     WHERE (j.status IN ('queued', 'succeeded', 'cancelled', 'failed') AND a.id IS NOT NULL)
	        OR (j.status IN ('active', 'verifying', 'cancelling') AND a.id IS NULL)
	        OR (j.status = 'active' AND a.status = 'committing')
	        OR (j.status = 'verifying' AND a.status <> 'committing')`},
	{3, `SELECT format('job %s is %s with %s succeeded attempts (succeeded_attempt_id %s)',
	            j.id, j.status, count(a.id), coalesce(j.succeeded_attempt_id::text, 'null'))
	     FROM jobs j LEFT JOIN job_attempts a ON a.job_id = j.id AND a.status = 'succeeded'
	     GROUP BY j.id
	     HAVING (j.status = 'succeeded') <> (count(a.id) = 1) OR count(a.id) > 1
	         OR (j.status = 'succeeded' AND j.succeeded_attempt_id IS DISTINCT FROM min(a.id::text)::uuid)`},
	{3, `SELECT format('succeeded job %s lacks the journal path verifying -> succeeded after a device commit', j.id)
	     FROM jobs j WHERE j.status = 'succeeded' AND NOT (
	         EXISTS (SELECT 1 FROM job_events e WHERE e.job_id = j.id AND e.kind = 'job'
	                 AND e.from_status = 'verifying' AND e.to_status = 'succeeded')
	     AND EXISTS (SELECT 1 FROM job_events e WHERE e.attempt_id = j.succeeded_attempt_id
	                 AND e.from_status = 'uploading' AND e.to_status = 'committing' AND e.actor = 'device'))`},
	{3, `SELECT format('job %s went cancelling -> succeeded (event %s)', job_id, id) FROM job_events
	     WHERE kind = 'job' AND from_status = 'cancelling' AND to_status = 'succeeded'`},
	// A withdrawn offer (failure code offer_withdrawn) spends no budget:
	// withdrawn_count counts them, and every attempt's number less the
	// withdrawn offers before it is within max_attempts.
	{5, `SELECT format('job %s: withdrawn_count %s but %s withdrawn offers', j.id, j.withdrawn_count, coalesce(w.n, 0))
	     FROM jobs j LEFT JOIN (SELECT job_id, count(*) n FROM job_attempts
	                            WHERE failure_code = 'offer_withdrawn' GROUP BY job_id) w ON w.job_id = j.id
	     WHERE coalesce(w.n, 0) <> j.withdrawn_count`},
	{5, `SELECT format('attempt %s is number %s after %s withdrawn offers, past max_attempts %s',
	            a.id, a.attempt_number, a.withdrawn_before, j.max_attempts)
	     FROM (SELECT id, job_id, attempt_number,
	                  count(*) FILTER (WHERE failure_code = 'offer_withdrawn')
	                      OVER (PARTITION BY job_id ORDER BY attempt_number
	                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS withdrawn_before
	           FROM job_attempts) a JOIN jobs j ON j.id = a.job_id
	     WHERE a.attempt_number - a.withdrawn_before > j.max_attempts`},
	{5, `SELECT format('job %s requeued at %s (event %s) past its budget or deadline', j.id, e.at, e.id)
	     FROM job_events e JOIN jobs j ON j.id = e.job_id
	     WHERE e.kind = 'job' AND e.from_status = 'active' AND e.to_status = 'queued'
	       AND (e.at >= j.admission_deadline
	            OR (SELECT count(*) FILTER (WHERE x.from_status IS NULL)
	                     - count(*) FILTER (WHERE x.to_status = 'failed' AND x.code = 'offer_withdrawn')
	                FROM job_events x WHERE x.job_id = e.job_id AND x.kind = 'attempt'
	                AND x.id < e.id) >= j.max_attempts)`},
	// A plaintext token is 32 base64url characters, so a value of 64
	// lowercase hex characters is never one. (Length and characters apart:
	// a bounded repeat such as {64} costs Postgres's regex engine about
	// five times as much, per row.)
	{6, `SELECT format('attempt %s has a malformed token hash', id) FROM job_attempts
	     WHERE NOT (octet_length(commit_token_hash) = 64 AND commit_token_hash ~ '^[0-9a-f]*$')`},
	{6, `SELECT format('token hash shared by %s attempts', count(*)) FROM job_attempts
	     GROUP BY commit_token_hash HAVING count(*) > 1`},
	{7, `SELECT format('job %s is %s with hold %s (%s holds)', j.id, j.status, coalesce(min(h.status), 'missing'), count(h.job_id))
	     FROM jobs j LEFT JOIN holds h ON h.job_id = j.id AND h.buyer_id = j.buyer_id
	     GROUP BY j.id
	     HAVING count(h.job_id) <> 1 OR min(h.status) <> CASE
	         WHEN j.status = 'succeeded' THEN 'captured'
	         WHEN j.status IN ('cancelled', 'failed') THEN 'released' ELSE 'held' END`},
	{7, `SELECT format('job %s is %s with %s terminal webhooks (%s)', j.id, j.status, count(w.id), string_agg(w.event, ','))
	     FROM jobs j LEFT JOIN webhook_outbox w ON w.job_id = j.id AND w.event IN ('succeeded', 'cancelled', 'failed')
	     GROUP BY j.id
	     HAVING count(w.id) <> CASE WHEN j.status IN ('succeeded', 'cancelled', 'failed') THEN 1 ELSE 0 END
	         OR (count(w.id) = 1 AND min(w.event) <> j.status)`},
	// A prune removes captured holds with their jobs and records their sum
	// in pruned_captures, so captured_cents is the captured holds left plus
	// the pruned ones ([R:retention.ledger-kept]).
	{7, `SELECT format('buyer %s: balance %s + held %s + captured %s <> initial %s (captured holds %s, pruned %s)',
	            b.id, b.balance_cents, h.held, b.captured_cents, b.initial_cents, h.captured, p.captured)
	     FROM buyers b CROSS JOIN LATERAL (
	         SELECT coalesce(sum(amount_cents) FILTER (WHERE status = 'held'), 0) held,
	                coalesce(sum(amount_cents) FILTER (WHERE status = 'captured'), 0) captured
	         FROM holds WHERE buyer_id = b.id) h
	     CROSS JOIN LATERAL (
	         SELECT coalesce(sum(captured_cents), 0) captured FROM pruned_captures WHERE buyer_id = b.id) p
	     WHERE b.balance_cents + h.held + b.captured_cents <> b.initial_cents
	        OR b.captured_cents <> h.captured + p.captured`},
	{8, `SELECT format('succeeded job %s: output %s/%s/%s differs from attempt %s key %s claim %s/%s',
	            j.id, j.output_key, j.output_bytes, j.output_sha256, a.id,
	            'outputs/' || j.id || '/' || a.id || '.mp4', a.claimed_output_bytes, a.claimed_output_sha256)
	     FROM jobs j JOIN job_attempts a ON a.id = j.succeeded_attempt_id
	     WHERE j.output_key IS DISTINCT FROM 'outputs/' || j.id || '/' || a.id || '.mp4'
	        OR j.output_key IS DISTINCT FROM a.claimed_output_key
	        OR j.output_bytes IS DISTINCT FROM a.claimed_output_bytes
	        OR j.output_sha256 IS DISTINCT FROM a.claimed_output_sha256`},
	{9, `SELECT format('device %s has %s live attempts but %s slots', d.id, count(a.id), d.slots_total)
	     FROM devices d JOIN job_attempts a ON a.device_id = d.id AND a.status IN ` + SQLLiveStatuses + `
	     GROUP BY d.id HAVING count(a.id) > d.slots_total`},
}

// CheckInvariants evaluates SPEC section 4, invariants 1-9, over the rows q
// sees and returns every violation found (nil when the state is sound). The
// error is only for trouble running the checks. Invariant 8 is checked
// against the recorded rows here; CheckOutputs re-reads the stored bytes. Invariant 9's in-memory half (gateway slots) is
// checked by the gateway.
func CheckInvariants(ctx context.Context, q Querier) ([]protocol.Violation, error) {
	var out []protocol.Violation
	var j journalRows
	if err := readAll(ctx, q, invariantReads(&out, &j)); err != nil {
		return nil, err
	}
	return append(out, j.violations()...), nil
}

// invariantReads are CheckInvariants' statements: the SQL checks as one
// statement (sqlInvariants), whose violations go to out in the checks'
// order, and the journal and its subjects, which go to j.
func invariantReads(out *[]protocol.Violation, j *journalRows) []read {
	first := len(*out)
	var order []int // each violation's check, parallel to (*out)[first:]
	checks := read{what: "check invariants", sql: sqlInvariants,
		row: func(r pgx.Rows) error {
			var c int
			var m string
			if err := r.Scan(&c, &m); err != nil {
				return err
			}
			if c < 0 || c >= len(invariantChecks) {
				return fmt.Errorf("check %d: no such check", c)
			}
			// Rows come check by check (an Append of the checks in order);
			// the insertion keeps that order whatever plan produced them.
			at := len(order)
			for at > 0 && order[at-1] > c {
				at--
			}
			order = slices.Insert(order, at, c)
			*out = slices.Insert(*out, first+at, protocol.Violation{Invariant: invariantChecks[c].invariant, Message: m})
			return nil
		}}
	return append([]read{checks}, j.reads()...)
}

// sqlInvariants runs every invariantChecks query in one statement: a row
// (check index, message) per violation. One statement rather than one per
// check because a differential campaign runs them after every step, and at
// a few rows per table Postgres spent more on each statement's protocol,
// portal and executor set-up than on its scan (pg_stat_statements: 14
// statements of 9-43 us each, plus about 25 us of protocol per statement).
var sqlInvariants = func() string {
	parts := make([]string, len(invariantChecks))
	for i, c := range invariantChecks {
		parts[i] = fmt.Sprintf("SELECT %d, m FROM (%s) q%d(m)", i, c.query, i)
	}
	return strings.Join(parts, "\nUNION ALL\n")
}()
