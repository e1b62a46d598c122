package fencing

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/store"
)

// Status writes. Each is guarded by the status it was read in (and, for
// attempts, the full identity fence), and each goes through
// protocol.Assert*Transition first; the database's trigger refuses the same
// transitions again.
const (
	sqlEndAttempt = `
UPDATE job_attempts SET status = $5, failure_code = nullif($6, ''), ended_at = $7
WHERE id = $1 AND job_id = $2 AND device_id = $3 AND lease_epoch = $4 AND status = $8`

	sqlMoveJob = `
UPDATE jobs SET status = $3, failure_code = nullif($4, ''), updated_at = $5
WHERE id = $1 AND status = $2`

	sqlSucceedJob = `
UPDATE jobs SET status = 'succeeded', output_key = $3, output_bytes = $4, output_sha256 = $5,
       succeeded_attempt_id = $6, updated_at = $7
WHERE id = $1 AND status = $2`

	// sqlSettleHold settles a held hold once and moves its money: released
	// money returns to the balance, captured money to the captured total.
	sqlSettleHold = `
WITH h AS (
    UPDATE holds SET status = $2, settled_at = $3 WHERE job_id = $1 AND status = 'held'
    RETURNING buyer_id, amount_cents)
UPDATE buyers b
SET balance_cents  = b.balance_cents + CASE WHEN $2 = 'released' THEN h.amount_cents ELSE 0 END,
    captured_cents = b.captured_cents + CASE WHEN $2 = 'captured' THEN h.amount_cents ELSE 0 END
FROM h WHERE b.id = h.buyer_id`

	// sqlEnqueueWebhook writes the job's terminal webhook row. A buyer with
	// no webhook_url gets it already settled, as the deliverer would mark it
	// (last_error 'no webhook url', webhook.sqlMarkNoURL): it is never
	// pending, so neither a later UPDATE of every such row nor the pending
	// index pays for it.
	sqlEnqueueWebhook = `
INSERT INTO webhook_outbox (job_id, event, payload, created_at, next_attempt_at, delivered_at, last_error)
SELECT j.id, $2, $3, $4, $4, CASE WHEN b.webhook_url IS NULL THEN $4::timestamptz END,
       CASE WHEN b.webhook_url IS NULL THEN 'no webhook url' END
FROM jobs j JOIN buyers b ON b.id = j.buyer_id WHERE j.id = $1`

	sqlJournal = store.SQLJournalInsert + `
VALUES ($1, $2, nullif($3, '')::uuid, nullif($4, ''), $5, $6, $7, $8)`

	// sqlJournalByOperator is sqlJournalRows for a step an operator took:
	// the rows also name the operator ($9), as job_events' CHECK requires
	// of every row whose actor is operator.
	sqlJournalByOperator = `INSERT INTO job_events (kind, job_id, attempt_id, from_status, to_status, code, actor, at, operator_id)
SELECT k, j, nullif(a, '')::uuid, nullif(f, ''), t, c, $7, $8, $9::uuid
FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[]) AS u(k, j, a, f, t, c)`

	// sqlJournalRows is sqlJournal for several rows of one step (one actor,
	// one instant) in one statement: unnest keeps the arrays' order, so the
	// rows get their serial ids in the order the step journalled them.
	sqlJournalRows = store.SQLJournalInsert + `
SELECT k, j, nullif(a, '')::uuid, nullif(f, ''), t, c, $7, $8
FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[]) AS u(k, j, a, f, t, c)`
)

// step is the context of one deciding transaction: who acts and when. Every
// journal row and timestamp it writes uses its one instant.
type step struct {
	tx    pgx.Tx
	now   time.Time
	actor protocol.Actor
	// operatorID names the operator of a step whose actor is
	// protocol.ActorOperator ("" otherwise).
	operatorID string
	// pipe collects the step's writes, to be sent in one round trip by
	// flush, or by commit with COMMIT behind them (see Service.pipelined).
	pipe *pgx.Batch
	// events are the journal rows a pipelined step has queued since its last
	// flush, which sends them last and as one statement: they reference
	// only rows written before them.
	events journalRows
}

// journalRows are job_events rows as the columns of sqlJournalRows.
type journalRows struct {
	kind, job, attempt, from, to, code []string
}

func (r *journalRows) add(kind, jobID, attemptID, from, to, code string) {
	r.kind, r.job, r.attempt = append(r.kind, kind), append(r.job, jobID), append(r.attempt, attemptID)
	r.from, r.to, r.code = append(r.from, from), append(r.to, to), append(r.code, code)
}

// write queues one write, sent by the step's next flush or its commit. one
// says the write must hit exactly one row (a fence): it goes as
// fenced(sql), which Postgres refuses, failing the whole transaction, when
// it hits any other number (fenceError makes that ErrInternal). what names
// the write in that error.
func (st *step) write(_ context.Context, what string, one bool, sql string, args ...any) error {
	if one {
		sql, args = fenced(sql, len(args)+1), append(args, what)
	}
	st.pipe.Queue(sql, args...)
	return nil
}

// queueJournal queues the journal rows of a pipelined step as one
// statement, behind its writes: they reference only rows written before.
func (st *step) queueJournal() {
	switch ev := st.events; {
	case len(ev.kind) == 0:
	case st.actor == protocol.ActorOperator:
		st.pipe.Queue(sqlJournalByOperator, ev.kind, ev.job, ev.attempt, ev.from, ev.to, ev.code, string(st.actor), st.now, st.operatorID)
	case len(ev.kind) == 1:
		st.pipe.Queue(sqlJournal, ev.kind[0], ev.job[0], ev.attempt[0], ev.from[0], ev.to[0], ev.code[0], string(st.actor), st.now)
	default:
		st.pipe.Queue(sqlJournalRows, ev.kind, ev.job, ev.attempt, ev.from, ev.to, ev.code, string(st.actor), st.now)
	}
	st.events = journalRows{}
}

// flush sends the queued writes, the journal rows and any reads queued
// behind them in one round trip, and runs the reads' callbacks; the
// transaction stays open for the step's next decisions.
func (st *step) flush(ctx context.Context) error {
	st.queueJournal()
	if st.pipe.Len() == 0 {
		return nil
	}
	b := st.pipe
	st.pipe = &pgx.Batch{}
	if err := st.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pipelined statements: %w", fenceError(err))
	}
	return nil
}

// commit ends a pipelined step: its queued writes, its journal rows and
// COMMIT go in one round trip. A write that fails (a fenced one that hit
// other than one row included) makes Postgres skip the COMMIT behind it, so
// the transaction is left open and failed, for the caller to roll back.
// With nothing queued it is a plain COMMIT.
func (st *step) commit(ctx context.Context) error {
	st.queueJournal()
	if st.pipe.Len() == 0 {
		return st.tx.Commit(ctx)
	}
	store.QueueCommit(st.pipe)
	b := st.pipe
	st.pipe = nil
	if err := st.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pipelined statements: %w", fenceError(err))
	}
	return nil
}

// journal appends one job_events row; from is "" for an insert, attemptID
// is "" for a job row.
func (st *step) journal(ctx context.Context, jobID, attemptID, from, to string, code protocol.FailureCode) error {
	kind := "job"
	if attemptID != "" {
		kind = "attempt"
	}
	st.events.add(kind, jobID, attemptID, from, to, string(code))
	return nil
}

// heartbeat records that the device was heard from at st.now: every
// accepted device operation (lease past no_slot, progress_ok, a commit past
// transaction 1's refusals, fail_ok) calls it inside its deciding
// transaction, and no refusal does, since a refusal mutates nothing. The
// device row is the last lock such a transaction takes (see doc.go).
//
// In a pipelined step (Service.pipelined) the write is queued with the
// step's others, so it costs no round trip of its own.
func (st *step) heartbeat(ctx context.Context, deviceID string) error {
	return st.write(ctx, "heartbeat device "+deviceID, false, store.SQLHeartbeat, deviceID, st.now)
}

// endAttempt moves a locked attempt to a terminal status under fence f.
func (st *step) endAttempt(ctx context.Context, a *attemptRow, f fence, to protocol.AttemptStatus, code protocol.FailureCode) error {
	if err := protocol.AssertAttemptTransition(a.Status, to); err != nil {
		return internalf("attempt %s: %v", a.ID, err)
	}
	if err := st.write(ctx, "end attempt "+a.ID, true, sqlEndAttempt, a.ID, a.JobID, f.DeviceID, f.LeaseEpoch, string(to),
		string(code), st.now, string(a.Status)); err != nil {
		return err
	}
	if err := st.journal(ctx, a.JobID, a.ID, string(a.Status), string(to), code); err != nil {
		return err
	}
	a.Status = to
	return nil
}

// moveJob moves a locked job to any status but succeeded (see succeedJob).
// code is the job's failure code and is only given for failed. A terminal
// move settles the hold (released) and enqueues the terminal webhook, in
// this same transaction.
func (st *step) moveJob(ctx context.Context, j *jobRow, to protocol.JobStatus, code protocol.FailureCode) error {
	if err := protocol.AssertJobTransition(j.Status, to); err != nil {
		return internalf("job %s: %v", j.ID, err)
	}
	if to == protocol.JobSucceeded || (code != "") != (to == protocol.JobFailed) {
		return internalf("job %s: move to %s with code %q", j.ID, to, code)
	}
	if err := st.write(ctx, "move job "+j.ID, true, sqlMoveJob, j.ID, string(j.Status), string(to), string(code), st.now); err != nil {
		return err
	}
	if to.Terminal() {
		if err := st.settle(ctx, j.ID, to, code, protocol.HoldReleased); err != nil {
			return err
		}
	}
	if err := st.journal(ctx, j.ID, "", string(j.Status), string(to), code); err != nil {
		return err
	}
	j.Status = to
	return nil
}

// succeedJob records a's claimed output on the job, captures the hold and
// enqueues the webhook. It is reachable only from verifying: the
// transition table has no cancelling -> succeeded.
func (st *step) succeedJob(ctx context.Context, j *jobRow, a attemptRow) error {
	if err := protocol.AssertJobTransition(j.Status, protocol.JobSucceeded); err != nil {
		return internalf("job %s: %v", j.ID, err)
	}
	if err := st.write(ctx, "succeed job "+j.ID, true, sqlSucceedJob, j.ID, string(j.Status), a.Claimed.Key, a.Claimed.Bytes,
		a.Claimed.SHA256, a.ID, st.now); err != nil {
		return err
	}
	if err := st.settle(ctx, j.ID, protocol.JobSucceeded, "", protocol.HoldCaptured); err != nil {
		return err
	}
	if err := st.journal(ctx, j.ID, "", string(j.Status), string(protocol.JobSucceeded), ""); err != nil {
		return err
	}
	j.Status = protocol.JobSucceeded
	return nil
}

// webhookPayload is the body of a terminal webhook.
type webhookPayload struct {
	JobID       string               `json:"job_id"`
	Status      protocol.JobStatus   `json:"status"`
	FailureCode protocol.FailureCode `json:"failure_code,omitempty"`
	At          time.Time            `json:"at"`
}

// settle is the once-only side of a terminal job transition: the hold is
// settled and one terminal webhook row is enqueued.
func (st *step) settle(ctx context.Context, jobID string, to protocol.JobStatus, code protocol.FailureCode, hold protocol.HoldStatus) error {
	if err := st.write(ctx, "settle hold of job "+jobID, true, sqlSettleHold, jobID, string(hold), st.now); err != nil {
		return err
	}
	payload, err := json.Marshal(webhookPayload{JobID: jobID, Status: to, FailureCode: code, At: st.now})
	if err != nil {
		return fmt.Errorf("webhook payload: %w", err)
	}
	return st.write(ctx, "enqueue webhook for job "+jobID, true, sqlEnqueueWebhook, jobID, string(to), payload, st.now)
}

// cancelBoth finalizes a cancellation: the live attempt is cancelled with
// buyer_cancelled, then the cancelling job is cancelled.
func (st *step) cancelBoth(ctx context.Context, j *jobRow, a *attemptRow, f fence) error {
	if err := st.endAttempt(ctx, a, f, protocol.AttemptCancelled, protocol.FailBuyerCancelled); err != nil {
		return err
	}
	return st.moveJob(ctx, j, protocol.JobCancelled, "")
}

// afterAttemptEnded decides a job whose live attempt (its latest) just
// ended with code (the rule Fail and Sweep share): a cancelling job is
// cancelled; otherwise the job is requeued only if code is retryable, the
// attempts it has spent (every attempt but the withdrawn offers, this one
// included) are fewer than max_attempts and the deadline has not passed;
// otherwise it fails with code. v is Fail's variant (Sweep passes the
// correct one, variant{}).
func (st *step) afterAttemptEnded(ctx context.Context, j *jobRow, code protocol.FailureCode, v variant) (requeued bool, err error) {
	retryable := code.IsRetryable() || v.requeueAnyFailure()
	inBudget := j.AttemptCount-j.WithdrawnCount < j.MaxAttempts || v.ignoreRetryBudget()
	switch {
	case j.Status == protocol.JobCancelling:
		return false, st.moveJob(ctx, j, protocol.JobCancelled, "")
	case retryable && inBudget && st.now.Before(j.AdmissionDeadline):
		if err := st.moveJob(ctx, j, protocol.JobQueued, ""); err != nil {
			return true, err
		}
		return true, st.notifyJobs(ctx, j.Service)
	default:
		return false, st.moveJob(ctx, j, protocol.JobFailed, code)
	}
}
