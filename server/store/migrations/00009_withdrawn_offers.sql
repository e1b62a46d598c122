-- An offer the gateway leased but never delivered is withdrawn, and spends
-- none of the job's budget (issue 48).
--
-- A gateway that could not write a lease offer (the device's session had
-- closed while the lease transaction ran, or the offer's grants could not
-- be made) gave the attempt back with a fail provider_offline, which counts
-- against max_attempts like any attempt: an agent stopping with two jobs
-- running saw a job's three attempts spent in 7 ms, one of them never sent.
-- Withdraw (fencing.Service.Withdraw, SPEC section 3) ends such an attempt
-- as failed with its own code, offer_withdrawn, and counts it in
-- jobs.withdrawn_count; the job has spent attempt_count - withdrawn_count
-- of its max_attempts. Attempt numbers stay 1..n without gaps (invariant 1),
-- so attempt_count may now pass max_attempts by the withdrawn offers, and
-- the row rule of 00001 (attempt_count <= max_attempts, invariant 5 in the
-- database) becomes the same rule over the attempts spent.

-- +goose Up

ALTER DOMAIN attempt_failure_code DROP CONSTRAINT attempt_failure_code_check;
ALTER DOMAIN attempt_failure_code ADD CONSTRAINT attempt_failure_code_check CHECK (VALUE IN
    ('no_capacity', 'lease_expired', 'download_failed', 'upload_failed',
     'provider_offline', 'internal_error', 'runner_failed', 'verification_failed',
     'commit_conflict', 'buyer_cancelled', 'offer_withdrawn'));

ALTER TABLE jobs
    ADD COLUMN withdrawn_count int NOT NULL DEFAULT 0,
    -- 00001's CHECK (attempt_count >= 0 AND attempt_count <= max_attempts),
    -- a table constraint Postgres named jobs_check.
    DROP CONSTRAINT jobs_check,
    ADD CONSTRAINT jobs_attempts_spent_check CHECK (withdrawn_count >= 0 AND attempt_count >= withdrawn_count
                                                    AND attempt_count - withdrawn_count <= max_attempts);

-- +goose Down

ALTER TABLE jobs
    DROP CONSTRAINT jobs_attempts_spent_check,
    DROP COLUMN withdrawn_count,
    ADD CONSTRAINT jobs_check CHECK (attempt_count >= 0 AND attempt_count <= max_attempts);

ALTER DOMAIN attempt_failure_code DROP CONSTRAINT attempt_failure_code_check;
ALTER DOMAIN attempt_failure_code ADD CONSTRAINT attempt_failure_code_check CHECK (VALUE IN
    ('no_capacity', 'lease_expired', 'download_failed', 'upload_failed',
     'provider_offline', 'internal_error', 'runner_failed', 'verification_failed',
     'commit_conflict', 'buyer_cancelled'));
