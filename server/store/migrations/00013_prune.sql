-- Retention (issue 52): `rendermac admin prune` and the server's
-- --retain-finished remove finished jobs older than a bound with every row
-- that belongs to them (docs/semantics.md, "Retention").
--
-- A pruned job's hold goes with it, and a captured hold is money the buyer
-- spent: invariant 7 says captured_cents is the sum of the captured holds.
-- So a prune records what it removed, per buyer and batch, in
-- pruned_captures, an insert-only ledger: captured_cents stays what it was
-- (no write to buyers, so a prune never waits on, nor blocks, a commit's
-- capture of the same buyer), and invariant 7 reads
-- captured_cents = captured holds + pruned captures.
--
-- No new index on jobs: the prune finds its candidates oldest first through
-- job_events_terminal_idx (00006), the terminal journal row's time, which
-- is the job's terminal time; an index on jobs would be one more index write
-- on every job's last transition.

-- A pruned job's stored objects (its input, its attempts' outputs) are
-- deleted from the artifact store after the rows are gone. The batch that
-- deletes the rows queues their keys in artifact_deletions in the same
-- transaction; the prune deletes the objects and then the queue rows. A
-- crash between the two leaves keys queued, which the next prune deletes
-- first, so no object of a pruned job outlives the next prune.

-- +goose Up

CREATE TABLE pruned_captures (
    id             bigserial   PRIMARY KEY,
    buyer_id       uuid        NOT NULL REFERENCES buyers (id),
    captured_cents bigint      NOT NULL CHECK (captured_cents >= 0),
    jobs           int         NOT NULL CHECK (jobs >= 1),
    pruned_at      timestamptz NOT NULL
);

CREATE INDEX pruned_captures_buyer_idx ON pruned_captures (buyer_id);

CREATE TABLE artifact_deletions (
    key       text        PRIMARY KEY CHECK (octet_length(key) BETWEEN 1 AND 512),
    queued_at timestamptz NOT NULL
);

-- Deleting a job, an attempt, runs the foreign keys' checks on every
-- table that references it, and Postgres looks the referencing rows up by
-- the referencing column. Three had no index that lookup can use
-- (webhook_outbox.job_id has only a partial one, for terminal events), so
-- each deleted row scanned a whole table: a prune of 2,000 jobs took 4.4 s
-- on a database of 2,000. These make each check an index probe. They cost
-- an index write per webhook row, per attempt journal row and per
-- succeeded job (docs/semantics.md, "Retention").
CREATE INDEX webhook_outbox_job_idx ON webhook_outbox (job_id);
CREATE INDEX job_events_attempt_idx ON job_events (attempt_id) WHERE attempt_id IS NOT NULL;
CREATE INDEX jobs_succeeded_attempt_idx ON jobs (succeeded_attempt_id) WHERE succeeded_attempt_id IS NOT NULL;

-- +goose Down

DROP INDEX jobs_succeeded_attempt_idx;
DROP INDEX job_events_attempt_idx;
DROP INDEX webhook_outbox_job_idx;

DROP TABLE artifact_deletions;
DROP TABLE pruned_captures;
