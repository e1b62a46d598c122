-- The same rules as 00001, held at a lower cost per write (issue 13).
--
-- Postgres re-reads every CHECK constraint of a table from its stored text
-- for each INSERT or UPDATE statement, and evaluates all of them on each row,
-- whichever columns the statement sets. Measured with pgbench on one jobs
-- row, the 14 CHECKs of jobs cost about 0.06 ms of an UPDATE's 0.2 ms, and
-- the plpgsql status trigger another 0.04 ms. A job's happy path writes
-- jobs and job_attempts about eight times.
--
-- So, with nothing allowed that was refused before:
--   * the value rules of single columns move into domains. A domain's check
--     runs when a value is written into the column, from an expression that
--     the backend caches, and not when an UPDATE leaves the column alone. The
--     rules that tie columns together stay table CHECKs;
--   * the status triggers get a WHEN clause that holds SPEC section 2's tables
--     as arrays of 'from>to'. A legal write is then one array lookup and never
--     enters plpgsql; the function runs only to refuse. status_transition_allowed
--     (00001) stays the readable table; a test checks the trigger arrays, the
--     function and the protocol package against each other.

-- +goose Up

CREATE DOMAIN sha256_hex AS text CHECK (VALUE ~ '^[0-9a-f]{64}$');

CREATE DOMAIN job_status AS text CHECK (VALUE IN
    ('queued', 'active', 'verifying', 'cancelling', 'succeeded', 'cancelled', 'failed'));

CREATE DOMAIN attempt_status AS text CHECK (VALUE IN
    ('leased', 'downloading', 'running', 'uploading', 'committing',
     'succeeded', 'failed', 'lost', 'cancelled'));

CREATE DOMAIN job_failure_code AS text CHECK (VALUE IN
    ('no_capacity', 'lease_expired', 'download_failed', 'upload_failed',
     'provider_offline', 'internal_error', 'runner_failed', 'verification_failed',
     'commit_conflict', 'buyer_cancelled', 'admission_expired'));

CREATE DOMAIN attempt_failure_code AS text CHECK (VALUE IN
    ('no_capacity', 'lease_expired', 'download_failed', 'upload_failed',
     'provider_offline', 'internal_error', 'runner_failed', 'verification_failed',
     'commit_conflict', 'buyer_cancelled'));

-- A column used by a trigger cannot change type: the triggers go first.
DROP TRIGGER jobs_status_transition ON jobs;
DROP TRIGGER job_attempts_status_transition ON job_attempts;

ALTER TABLE jobs
    DROP CONSTRAINT jobs_input_sha256_check,
    DROP CONSTRAINT jobs_request_fingerprint_check,
    DROP CONSTRAINT jobs_output_sha256_check,
    DROP CONSTRAINT jobs_status_check,
    DROP CONSTRAINT jobs_failure_code_check,
    ALTER COLUMN input_sha256 TYPE sha256_hex,
    ALTER COLUMN request_fingerprint TYPE sha256_hex,
    ALTER COLUMN output_sha256 TYPE sha256_hex,
    ALTER COLUMN status TYPE job_status,
    ALTER COLUMN failure_code TYPE job_failure_code;

ALTER TABLE job_attempts
    DROP CONSTRAINT job_attempts_commit_token_hash_check,
    DROP CONSTRAINT job_attempts_status_check,
    DROP CONSTRAINT job_attempts_failure_code_check,
    ALTER COLUMN commit_token_hash TYPE sha256_hex,
    ALTER COLUMN status TYPE attempt_status,
    ALTER COLUMN failure_code TYPE attempt_failure_code;

-- TG_ARGV[0] is the entity. Reached only through the WHEN clauses below,
-- that is only for a write they refuse.
-- +goose StatementBegin
CREATE FUNCTION refuse_status_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        RAISE EXCEPTION 'illegal % insert with status %', TG_ARGV[0], NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RAISE EXCEPTION 'illegal % transition % -> %', TG_ARGV[0], OLD.status, NEW.status
        USING ERRCODE = 'check_violation';
END;
$$;
-- +goose StatementEnd

-- Jobs start queued, attempts leased (SPEC section 2).
CREATE TRIGGER jobs_status_insert
    BEFORE INSERT ON jobs
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM 'queued')
    EXECUTE FUNCTION refuse_status_write('job');

CREATE TRIGGER job_attempts_status_insert
    BEFORE INSERT ON job_attempts
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM 'leased')
    EXECUTE FUNCTION refuse_status_write('attempt');

CREATE TRIGGER jobs_status_transition
    BEFORE UPDATE OF status ON jobs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status AND NOT coalesce(
        (OLD.status || '>' || NEW.status) = ANY ('{queued>active,queued>cancelled,queued>failed,active>queued,active>verifying,active>cancelling,active>failed,verifying>succeeded,verifying>cancelling,verifying>failed,cancelling>cancelled,cancelling>failed}'::text[]),
        false))
    EXECUTE FUNCTION refuse_status_write('job');

CREATE TRIGGER job_attempts_status_transition
    BEFORE UPDATE OF status ON job_attempts
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status AND NOT coalesce(
        (OLD.status || '>' || NEW.status) = ANY ('{leased>downloading,leased>running,leased>uploading,leased>failed,leased>lost,leased>cancelled,downloading>running,downloading>uploading,downloading>failed,downloading>lost,downloading>cancelled,running>uploading,running>failed,running>lost,running>cancelled,uploading>committing,uploading>failed,uploading>lost,uploading>cancelled,committing>succeeded,committing>failed,committing>cancelled}'::text[]),
        false))
    EXECUTE FUNCTION refuse_status_write('attempt');

DROP FUNCTION enforce_status_transition();

-- +goose Down

DROP TRIGGER jobs_status_insert ON jobs;
DROP TRIGGER job_attempts_status_insert ON job_attempts;
DROP TRIGGER jobs_status_transition ON jobs;
DROP TRIGGER job_attempts_status_transition ON job_attempts;
DROP FUNCTION refuse_status_write();

ALTER TABLE jobs
    ALTER COLUMN input_sha256 TYPE text,
    ALTER COLUMN request_fingerprint TYPE text,
    ALTER COLUMN output_sha256 TYPE text,
    ALTER COLUMN status TYPE text,
    ALTER COLUMN failure_code TYPE text,
    ADD CONSTRAINT jobs_input_sha256_check CHECK (input_sha256 ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT jobs_request_fingerprint_check CHECK (request_fingerprint ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT jobs_output_sha256_check CHECK (output_sha256 ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT jobs_status_check CHECK (status IN
        ('queued', 'active', 'verifying', 'cancelling', 'succeeded', 'cancelled', 'failed')),
    ADD CONSTRAINT jobs_failure_code_check CHECK (failure_code IN
        ('no_capacity', 'lease_expired', 'download_failed', 'upload_failed',
         'provider_offline', 'internal_error', 'runner_failed', 'verification_failed',
         'commit_conflict', 'buyer_cancelled', 'admission_expired'));

ALTER TABLE job_attempts
    ALTER COLUMN commit_token_hash TYPE text,
    ALTER COLUMN status TYPE text,
    ALTER COLUMN failure_code TYPE text,
    ADD CONSTRAINT job_attempts_commit_token_hash_check CHECK (commit_token_hash ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT job_attempts_status_check CHECK (status IN
        ('leased', 'downloading', 'running', 'uploading', 'committing',
         'succeeded', 'failed', 'lost', 'cancelled')),
    ADD CONSTRAINT job_attempts_failure_code_check CHECK (failure_code IN
        ('no_capacity', 'lease_expired', 'download_failed', 'upload_failed',
         'provider_offline', 'internal_error', 'runner_failed', 'verification_failed',
         'commit_conflict', 'buyer_cancelled'));

-- +goose StatementBegin
CREATE FUNCTION enforce_status_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> TG_ARGV[1] THEN
            RAISE EXCEPTION 'illegal % insert with status %', TG_ARGV[0], NEW.status
                USING ERRCODE = 'check_violation';
        END IF;
    ELSIF NEW.status IS DISTINCT FROM OLD.status
          AND NOT status_transition_allowed(TG_ARGV[0], OLD.status, NEW.status) THEN
        RAISE EXCEPTION 'illegal % transition % -> %', TG_ARGV[0], OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER jobs_status_transition
    BEFORE INSERT OR UPDATE OF status ON jobs
    FOR EACH ROW EXECUTE FUNCTION enforce_status_transition('job', 'queued');

CREATE TRIGGER job_attempts_status_transition
    BEFORE INSERT OR UPDATE OF status ON job_attempts
    FOR EACH ROW EXECUTE FUNCTION enforce_status_transition('attempt', 'leased');

DROP DOMAIN attempt_failure_code, job_failure_code, attempt_status, job_status, sha256_hex;
