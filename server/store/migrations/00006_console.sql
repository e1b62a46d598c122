-- The operator console (GET /console). Operators are people, not buyers:
-- their credentials live apart from api_keys so that a buyer's key can
-- never open the console. Like every bearer secret, only the lowercase hex
-- SHA-256 of the plaintext is stored.
--
-- Two partial indexes serve the console's pages, each kept small for the hot
-- path: job_events_terminal_idx holds one entry per job (its terminal
-- journal row) for the queue page's throughput over the last minutes, and
-- jobs_unended_idx holds the jobs not yet ended, which the queue page counts
-- by status without reading the history. The all-buyers job list needs no
-- index: it walks job_events' primary key, to which every job's creation
-- row is appended (an index on jobs would take an entry at every status
-- change, since those updates are never HOT).

-- +goose Up

CREATE TABLE operators (
    id         uuid        PRIMARY KEY,
    name       text        NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 200),
    token_hash text        NOT NULL UNIQUE CHECK (token_hash ~ '^[0-9a-f]{64}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);

CREATE INDEX job_events_terminal_idx ON job_events (at)
    WHERE kind = 'job' AND to_status IN ('succeeded', 'cancelled', 'failed');

CREATE INDEX jobs_unended_idx ON jobs (status)
    WHERE status IN ('queued', 'active', 'verifying', 'cancelling');

-- +goose Down

DROP INDEX jobs_unended_idx;
DROP INDEX job_events_terminal_idx;
DROP TABLE operators;
