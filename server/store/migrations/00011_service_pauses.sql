-- Pausing a service (issue 51): an operator stops the matcher offering a
-- service whose renderer is broken, without cancelling its queued jobs.
--
-- paused_services holds one row per paused service; the matcher's pick
-- skips jobs of a service that has one, and resume deletes it. The state
-- is a row, not a flag in the catalogue file, so that every control plane
-- sharing the database sees one answer and a restart keeps it.
--
-- Pausing is not a transition of any job, so it is not a job_events row
-- (whose rows the journal's replay rebuilds jobs and attempts from);
-- service_pause_events is its audit: one row per pause or resume that
-- changed the state (an idempotent repeat writes none), with the actor
-- `operator` and which operator. Operators are revoked, never deleted,
-- so the reference always names someone.

-- +goose Up

CREATE TABLE paused_services (
    service     text        PRIMARY KEY CHECK (octet_length(service) BETWEEN 1 AND 64),
    paused_at   timestamptz NOT NULL,
    operator_id uuid        NOT NULL REFERENCES operators (id)
);

CREATE TABLE service_pause_events (
    seq         bigserial   PRIMARY KEY,
    service     text        NOT NULL CHECK (octet_length(service) BETWEEN 1 AND 64),
    action      text        NOT NULL CHECK (action IN ('pause', 'resume')),
    actor       text        NOT NULL CHECK (actor = 'operator'),
    operator_id uuid        NOT NULL REFERENCES operators (id),
    at          timestamptz NOT NULL
);

-- +goose Down

DROP TABLE service_pause_events;
DROP TABLE paused_services;
