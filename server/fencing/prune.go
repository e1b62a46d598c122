package fencing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/faultpoint"
)

// OpPrune is PruneFinished's operation name (Stats, errors, dbstat).
const OpPrune = "prune"

// DefaultPruneBatch is how many jobs one prune transaction removes when the
// caller names no batch: small enough that the transaction is a few
// milliseconds and its locks (on finished jobs only) hold nothing a lease
// or a commit waits for.
const DefaultPruneBatch = 500

// The prune's statements (docs/semantics.md, "Retention").
//
// sqlPruneBatch is one batch in one statement, so in one short transaction
// of its own: it picks up to $2 finished jobs whose terminal journal row is
// older than $1, oldest first, through job_events_terminal_idx; locks them
// FOR UPDATE SKIP LOCKED (a job some transaction holds is left for the next
// batch, never waited for); deletes their journal rows, webhook rows, holds,
// attempts and the jobs themselves (the foreign keys are checked at the end
// of the statement, when all are gone); records each buyer's pruned
// captured holds in pruned_captures (invariant 7); and queues every object
// key the jobs had in artifact_deletions. A job's terminal journal row is
// written in the transaction that makes it terminal, so a job in a commit
// or a cancel is not yet a candidate, and the status test, re-evaluated on
// the locked row, keeps anything not finished out whatever the journal says.
// The deletes are ordered by the jobs they belong to only through v: no
// other operation deletes these rows, so they wait on nothing but a webhook
// delivery's short update of its own outbox row.
const (
	sqlPruneBatch = `
WITH v AS (
    SELECT j.id, j.buyer_id FROM job_events e JOIN jobs j ON j.id = e.job_id
    WHERE e.kind = 'job' AND e.to_status IN ('succeeded', 'cancelled', 'failed') AND e.at < $1
      AND j.status IN ('succeeded', 'cancelled', 'failed')
    ORDER BY e.at, e.id LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
), ev AS (
    DELETE FROM job_events x USING v WHERE x.job_id = v.id RETURNING 1
), wh AS (
    DELETE FROM webhook_outbox x USING v WHERE x.job_id = v.id RETURNING 1
), ho AS (
    DELETE FROM holds x USING v WHERE x.job_id = v.id RETURNING x.job_id, x.amount_cents, x.status
), att AS (
    DELETE FROM job_attempts x USING v WHERE x.job_id = v.id RETURNING x.job_id, x.id
), jo AS (
    DELETE FROM jobs x USING v WHERE x.id = v.id RETURNING x.id, x.buyer_id
), pc AS (
    INSERT INTO pruned_captures (buyer_id, captured_cents, jobs, pruned_at)
    SELECT jo.buyer_id, coalesce(sum(ho.amount_cents) FILTER (WHERE ho.status = 'captured'), 0), count(*), now()
    FROM jo LEFT JOIN ho ON ho.job_id = jo.id GROUP BY jo.buyer_id
    RETURNING 1
), keys AS (
    SELECT 'inputs/' || id AS key FROM jo
    UNION ALL SELECT 'outputs/' || job_id || '/' || id || '.mp4' FROM att
), q AS (
    INSERT INTO artifact_deletions (key, queued_at) SELECT key, now() FROM keys
    ON CONFLICT (key) DO NOTHING RETURNING 1
)
SELECT (SELECT count(*) FROM jo), (SELECT count(*) FROM att), (SELECT count(*) FROM ev),
       (SELECT count(*) FROM ho), (SELECT count(*) FROM wh), (SELECT count(*) FROM pc),
       ARRAY(SELECT key FROM keys)`

	// sqlPruneQueued lists queued object keys: those of a batch whose
	// objects a crash (or a store error) left undeleted.
	sqlPruneQueued = `SELECT key FROM artifact_deletions ORDER BY key LIMIT $1`

	sqlPruneDequeue = `DELETE FROM artifact_deletions WHERE key = ANY($1::text[])`

	// sqlPrunable counts what a prune with the same bound would remove now:
	// the candidates of sqlPruneBatch without a limit, and their rows.
	sqlPrunable = `
WITH v AS (
    SELECT j.id FROM job_events e JOIN jobs j ON j.id = e.job_id
    WHERE e.kind = 'job' AND e.to_status IN ('succeeded', 'cancelled', 'failed') AND e.at < $1
      AND j.status IN ('succeeded', 'cancelled', 'failed')
)
SELECT (SELECT count(*) FROM v),
       (SELECT count(*) FROM job_attempts x JOIN v ON x.job_id = v.id),
       (SELECT count(*) FROM job_events x JOIN v ON x.job_id = v.id),
       (SELECT count(*) FROM holds x JOIN v ON x.job_id = v.id),
       (SELECT count(*) FROM webhook_outbox x JOIN v ON x.job_id = v.id),
       (SELECT count(*) FROM artifact_deletions)`
)

// PruneStats counts what a prune removed (or, from CountPrunable, would
// remove).
type PruneStats struct {
	// Jobs, Attempts, Events (journal rows), Holds and Webhooks (outbox
	// rows) removed.
	Jobs, Attempts, Events, Holds, Webhooks int64
	// Objects is how many object keys were deleted from the artifact store
	// (a key with no object counts too: deleting it is done either way);
	// from CountPrunable, how many are queued from earlier prunes.
	Objects int64
	// Batches is how many batch transactions ran.
	Batches int
}

func (p *PruneStats) add(q PruneStats) {
	p.Jobs += q.Jobs
	p.Attempts += q.Attempts
	p.Events += q.Events
	p.Holds += q.Holds
	p.Webhooks += q.Webhooks
	p.Objects += q.Objects
	p.Batches += q.Batches
}

// PruneFinished removes every finished job (succeeded, cancelled, failed)
// whose terminal time (its terminal journal row's) is before olderThan,
// with all that belongs to it: attempts, journal rows, hold, webhook rows,
// its idempotency key (a column of the job) and its stored input and
// outputs. It works in batches of batch jobs (DefaultPruneBatch when batch
// < 1), each one statement in its own transaction that skips any job
// another transaction holds, so it never waits for, nor blocks, a lease or
// a commit; it never touches a job that is not finished or finished at or
// after olderThan. Objects are deleted from the store after their batch
// committed, through the artifact_deletions queue, so a crash in between
// leaves them for the next prune, which deletes queued keys first. It
// returns when no candidate is left (or ctx ends), with what it removed.
func (s *Service) PruneFinished(ctx context.Context, olderThan time.Time, batch int) (PruneStats, error) {
	ctx = dbstat.WithOp(ctx, OpPrune)
	if batch < 1 {
		batch = DefaultPruneBatch
	}
	var total PruneStats
	// Keys a previous prune queued but did not delete.
	if err := s.drainDeletions(ctx, batch, &total); err != nil {
		return total, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("%s: %w", OpPrune, err)
		}
		var st PruneStats
		var keys []string
		s.cfg.FaultPoints.Hit(ctx, faultpoint.PruneBeforeTx)
		err := s.retrying(ctx, OpPrune, func() error {
			var buyers int64
			return s.pool.QueryRow(ctx, sqlPruneBatch, olderThan, batch).Scan(
				&st.Jobs, &st.Attempts, &st.Events, &st.Holds, &st.Webhooks, &buyers, &keys)
		})
		if err != nil {
			return total, err
		}
		if st.Jobs == 0 {
			return total, nil
		}
		st.Batches = 1
		s.cfg.FaultPoints.Hit(ctx, faultpoint.PruneBeforeStoreDelete)
		n, err := s.deleteObjects(ctx, keys)
		st.Objects = n
		total.add(st)
		if err != nil {
			return total, err
		}
	}
}

// CountPrunable is PruneFinished's dry run: what a prune with olderThan
// would remove now, read in one statement, changing nothing. Objects is
// the keys still queued from earlier prunes (the candidates' own objects
// are one input per job and at most one output per attempt).
func (s *Service) CountPrunable(ctx context.Context, olderThan time.Time) (PruneStats, error) {
	var st PruneStats
	err := s.pool.QueryRow(dbstat.WithOp(ctx, OpPrune), sqlPrunable, olderThan).Scan(
		&st.Jobs, &st.Attempts, &st.Events, &st.Holds, &st.Webhooks, &st.Objects)
	if err != nil {
		return st, fmt.Errorf("%s: count: %w", OpPrune, err)
	}
	return st, nil
}

// drainDeletions deletes the objects of every key left queued, batch keys
// at a time.
func (s *Service) drainDeletions(ctx context.Context, batch int, total *PruneStats) error {
	for {
		rows, err := s.pool.Query(ctx, sqlPruneQueued, batch)
		if err != nil {
			return fmt.Errorf("%s: queued objects: %w", OpPrune, err)
		}
		var keys []string
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return fmt.Errorf("%s: queued objects: %w", OpPrune, err)
			}
			keys = append(keys, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("%s: queued objects: %w", OpPrune, err)
		}
		if len(keys) == 0 {
			return nil
		}
		n, err := s.deleteObjects(ctx, keys)
		total.Objects += n
		if err != nil {
			return err
		}
		if len(keys) < batch {
			return nil
		}
	}
}

// deleteObjects deletes each key's object from the store (and, on a sealing
// store, an output's sealed copy), then the keys from the queue. A key with
// no object is deleted already: a retried prune finds some so. On a store
// error the keys stay queued for the next prune.
func (s *Service) deleteObjects(ctx context.Context, keys []string) (int64, error) {
	if s.store == nil || len(keys) == 0 {
		return 0, nil
	}
	var n int64
	for _, key := range keys {
		for _, k := range objectKeys(s.store, key) {
			if err := s.store.Delete(ctx, k); err != nil && !errors.Is(err, artifact.ErrNotFound) {
				return n, fmt.Errorf("%s: delete object %s: %w", OpPrune, k, err)
			}
		}
		n++
	}
	if err := s.retrying(ctx, OpPrune, func() error {
		_, err := s.pool.Exec(ctx, sqlPruneDequeue, keys)
		return err
	}); err != nil {
		return n, err
	}
	return n, nil
}

// objectKeys are the keys holding key's bytes: key itself and, on a
// sealing store, an output's sealed copy (the one served).
func objectKeys(st artifact.Store, key string) []string {
	if served := artifact.ServedKey(st, key); served != key {
		return []string{key, served}
	}
	return []string{key}
}
