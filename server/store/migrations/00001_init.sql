-- The contract's tables (SPEC sections 1-4). Names are the contract: the
-- model, the service layer, the wire and the evidence cards all use them.
-- Every CHECK here restates a rule the service layer also enforces, so that a
-- bug in Go cannot write a row the contract forbids.

-- +goose Up

CREATE TABLE buyers (
    id             uuid        PRIMARY KEY,
    name           text        NOT NULL,
    balance_cents  bigint      NOT NULL CHECK (balance_cents >= 0),
    captured_cents bigint      NOT NULL DEFAULT 0 CHECK (captured_cents >= 0),
    -- initial_cents is what the buyer was created with: invariant 7 checks
    -- balance + held + captured = initial_cents.
    initial_cents  bigint      NOT NULL CHECK (initial_cents >= 0),
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- api_keys are for HTTP buyer auth; only the hash of a key is stored.
CREATE TABLE api_keys (
    id         uuid        PRIMARY KEY,
    buyer_id   uuid        NOT NULL REFERENCES buyers (id),
    key_hash   text        NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);

CREATE TABLE devices (
    id           uuid        PRIMARY KEY,
    name         text        NOT NULL,
    -- token_hash is null until a device is paired.
    token_hash   text        UNIQUE,
    services     text[]      NOT NULL,
    slots_total  int         NOT NULL CHECK (slots_total >= 1),
    status       text        NOT NULL DEFAULT 'offline'
                             CHECK (status IN ('online', 'offline', 'revoked')),
    last_seen_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE jobs (
    id                   uuid        PRIMARY KEY,
    buyer_id             uuid        NOT NULL REFERENCES buyers (id),
    service              text        NOT NULL,
    params               jsonb       NOT NULL DEFAULT '{}',
    input_bytes          bigint      NOT NULL CHECK (input_bytes >= 0),
    input_sha256         text        NOT NULL CHECK (input_sha256 ~ '^[0-9a-f]{64}$'),
    max_attempts         int         NOT NULL CHECK (max_attempts BETWEEN 1 AND 10),
    -- attempt_count <= max_attempts is invariant 5, held by the database too.
    attempt_count        int         NOT NULL DEFAULT 0
                                     CHECK (attempt_count >= 0 AND attempt_count <= max_attempts),
    status               text        NOT NULL CHECK (status IN
                             ('queued', 'active', 'verifying', 'cancelling', 'succeeded', 'cancelled', 'failed')),
    failure_code         text        CHECK (failure_code IN
                             ('no_capacity', 'lease_expired', 'download_failed', 'upload_failed',
                              'provider_offline', 'internal_error', 'runner_failed', 'verification_failed',
                              'commit_conflict', 'buyer_cancelled', 'admission_expired')),
    idempotency_key      text        CHECK (octet_length(idempotency_key) BETWEEN 1 AND 200),
    request_fingerprint  text        NOT NULL CHECK (request_fingerprint ~ '^[0-9a-f]{64}$'),
    created_at           timestamptz NOT NULL,
    admission_deadline   timestamptz NOT NULL CHECK (admission_deadline > created_at),
    output_key           text,
    output_bytes         bigint      CHECK (output_bytes >= 0),
    output_sha256        text        CHECK (output_sha256 ~ '^[0-9a-f]{64}$'),
    succeeded_attempt_id uuid,
    updated_at           timestamptz NOT NULL,
    -- Only a succeeded job carries an output, and it always does.
    CHECK ((status = 'succeeded') = (succeeded_attempt_id IS NOT NULL)),
    CHECK ((status = 'succeeded') = (output_key IS NOT NULL AND output_bytes IS NOT NULL
                                     AND output_sha256 IS NOT NULL)),
    -- A failure code belongs to a failed job and only to one.
    CHECK ((status = 'failed') = (failure_code IS NOT NULL)),
    -- NULL keys never collide, so jobs without a key are unconstrained.
    UNIQUE (buyer_id, idempotency_key)
);

-- The matcher's scan: oldest queued job first.
CREATE INDEX jobs_queued_idx ON jobs (created_at, id) WHERE status = 'queued';
-- The sweeper's admission scan.
CREATE INDEX jobs_queued_deadline_idx ON jobs (admission_deadline) WHERE status = 'queued';
CREATE INDEX jobs_buyer_idx ON jobs (buyer_id, created_at);

CREATE TABLE job_attempts (
    id                    uuid        PRIMARY KEY,
    job_id                uuid        NOT NULL REFERENCES jobs (id),
    attempt_number        int         NOT NULL CHECK (attempt_number >= 1),
    device_id             uuid        NOT NULL REFERENCES devices (id),
    status                text        NOT NULL CHECK (status IN
                              ('leased', 'downloading', 'running', 'uploading', 'committing',
                               'succeeded', 'failed', 'lost', 'cancelled')),
    lease_epoch           int         NOT NULL CHECK (lease_epoch >= 1),
    -- Only the hash of the commit token is stored (invariant 6).
    commit_token_hash     text        NOT NULL CHECK (commit_token_hash ~ '^[0-9a-f]{64}$'),
    lease_expires_at      timestamptz NOT NULL,
    -- The output the device claimed in commit transaction 1; verification
    -- reads it from here, never from the device again. A claim is untrusted
    -- and stored as given: judging it is verification's job, not a CHECK's.
    claimed_output_key    text,
    claimed_output_bytes  bigint,
    claimed_output_sha256 text,
    failure_code          text        CHECK (failure_code IN
                              ('no_capacity', 'lease_expired', 'download_failed', 'upload_failed',
                               'provider_offline', 'internal_error', 'runner_failed', 'verification_failed',
                               'commit_conflict', 'buyer_cancelled')),
    created_at            timestamptz NOT NULL,
    ended_at              timestamptz,
    CHECK ((status IN ('succeeded', 'failed', 'lost', 'cancelled')) = (ended_at IS NOT NULL)),
    CHECK (status NOT IN ('committing', 'succeeded') OR claimed_output_key IS NOT NULL),
    UNIQUE (job_id, attempt_number),
    UNIQUE (commit_token_hash)
);

-- Invariant 1 in the database itself: a second live attempt for a job is a
-- unique_violation, whatever the code above it does.
CREATE UNIQUE INDEX job_attempts_one_live_idx ON job_attempts (job_id)
    WHERE status IN ('leased', 'downloading', 'running', 'uploading', 'committing');
-- The sweeper's expiry scan and the matcher's slot count.
CREATE INDEX job_attempts_live_expiry_idx ON job_attempts (lease_expires_at)
    WHERE status IN ('leased', 'downloading', 'running', 'uploading', 'committing');
CREATE INDEX job_attempts_live_device_idx ON job_attempts (device_id)
    WHERE status IN ('leased', 'downloading', 'running', 'uploading', 'committing');

-- The circular reference is added once both tables exist.
ALTER TABLE jobs ADD CONSTRAINT jobs_succeeded_attempt_fk
    FOREIGN KEY (succeeded_attempt_id) REFERENCES job_attempts (id);

CREATE TABLE holds (
    job_id       uuid        PRIMARY KEY REFERENCES jobs (id),
    buyer_id     uuid        NOT NULL REFERENCES buyers (id),
    amount_cents bigint      NOT NULL CHECK (amount_cents >= 0),
    status       text        NOT NULL CHECK (status IN ('held', 'captured', 'released')),
    created_at   timestamptz NOT NULL,
    settled_at   timestamptz,
    -- Settled exactly once: a settled hold has a settlement time and a held one has none.
    CHECK ((status = 'held') = (settled_at IS NULL))
);

CREATE INDEX holds_buyer_idx ON holds (buyer_id) WHERE status = 'held';

CREATE TABLE webhook_outbox (
    id              bigserial   PRIMARY KEY,
    job_id          uuid        NOT NULL REFERENCES jobs (id),
    event           text        NOT NULL,
    payload         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL,
    attempts        int         NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL,
    delivered_at    timestamptz,
    last_error      text
);

-- One terminal webhook per job (invariant 7), in the database too.
CREATE UNIQUE INDEX webhook_outbox_terminal_idx ON webhook_outbox (job_id)
    WHERE event IN ('succeeded', 'cancelled', 'failed');
CREATE INDEX webhook_outbox_pending_idx ON webhook_outbox (next_attempt_at) WHERE delivered_at IS NULL;

CREATE TABLE job_events (
    id          bigserial   PRIMARY KEY,
    kind        text        NOT NULL CHECK (kind IN ('job', 'attempt')),
    job_id      uuid        NOT NULL REFERENCES jobs (id),
    attempt_id  uuid        REFERENCES job_attempts (id),
    from_status text,
    to_status   text        NOT NULL,
    code        text        NOT NULL DEFAULT '',
    actor       text        NOT NULL CHECK (actor IN ('buyer', 'matcher', 'device', 'verifier', 'sweeper')),
    at          timestamptz NOT NULL,
    CHECK ((kind = 'attempt') = (attempt_id IS NOT NULL))
);

CREATE INDEX job_events_job_idx ON job_events (job_id, id);

-- Defense in depth for invariant 4: SPEC section 2's tables, and triggers
-- that refuse any status write they do not allow. The service layer asserts
-- the same tables in Go (protocol.Assert*Transition) before every write; a
-- test checks status_transition_allowed against the protocol package for
-- every pair, so the two cannot drift. The tables live inside an immutable
-- function rather than in rows, so that no TRUNCATE or DELETE of data (a
-- harness resetting a database) can change what is allowed.
-- +goose StatementBegin
CREATE FUNCTION status_transition_allowed(entity text, from_status text, to_status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (entity, from_status, to_status) IN (
        ('job', 'queued', 'active'), ('job', 'queued', 'cancelled'), ('job', 'queued', 'failed'),
        ('job', 'active', 'queued'), ('job', 'active', 'verifying'), ('job', 'active', 'cancelling'),
        ('job', 'active', 'failed'),
        ('job', 'verifying', 'succeeded'), ('job', 'verifying', 'cancelling'), ('job', 'verifying', 'failed'),
        ('job', 'cancelling', 'cancelled'), ('job', 'cancelling', 'failed'),
        ('attempt', 'leased', 'downloading'), ('attempt', 'leased', 'running'), ('attempt', 'leased', 'uploading'),
        ('attempt', 'leased', 'failed'), ('attempt', 'leased', 'lost'), ('attempt', 'leased', 'cancelled'),
        ('attempt', 'downloading', 'running'), ('attempt', 'downloading', 'uploading'),
        ('attempt', 'downloading', 'failed'), ('attempt', 'downloading', 'lost'),
        ('attempt', 'downloading', 'cancelled'),
        ('attempt', 'running', 'uploading'), ('attempt', 'running', 'failed'), ('attempt', 'running', 'lost'),
        ('attempt', 'running', 'cancelled'),
        ('attempt', 'uploading', 'committing'), ('attempt', 'uploading', 'failed'),
        ('attempt', 'uploading', 'lost'), ('attempt', 'uploading', 'cancelled'),
        ('attempt', 'committing', 'succeeded'), ('attempt', 'committing', 'failed'),
        ('attempt', 'committing', 'cancelled'))
$$;
-- +goose StatementEnd

-- TG_ARGV[0] is the entity ('job' or 'attempt'); TG_ARGV[1] is the only
-- status a row may be inserted with (jobs start queued, attempts leased).
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

-- +goose Down

DROP TABLE job_events, webhook_outbox, holds;
ALTER TABLE jobs DROP CONSTRAINT jobs_succeeded_attempt_fk;
DROP TABLE job_attempts, jobs, devices, api_keys, buyers;
DROP FUNCTION enforce_status_transition();
DROP FUNCTION status_transition_allowed(text, text, text);
