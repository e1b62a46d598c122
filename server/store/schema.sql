-- The schema in force: what the migrations in migrations/ leave in a database,
-- as pg_dump prints it (owners, privileges, comments and session settings
-- dropped). Generated, never edited: TestSchemaInForceIsCurrent fails when
-- it differs from a freshly migrated database; rewrite it with
--   go test ./server/store/ -run TestSchemaInForceIsCurrent -update
-- Read it to see a table, trigger or function as it is now; the migrations
-- are the history (a later one may redefine what an earlier one made).
CREATE DOMAIN public.attempt_failure_code AS text
	CONSTRAINT attempt_failure_code_check CHECK ((VALUE = ANY (ARRAY['no_capacity'::text, 'lease_expired'::text, 'download_failed'::text, 'upload_failed'::text, 'provider_offline'::text, 'internal_error'::text, 'runner_failed'::text, 'verification_failed'::text, 'commit_conflict'::text, 'buyer_cancelled'::text, 'offer_withdrawn'::text])));

CREATE DOMAIN public.attempt_status AS text
	CONSTRAINT attempt_status_check CHECK ((VALUE = ANY (ARRAY['leased'::text, 'downloading'::text, 'running'::text, 'uploading'::text, 'committing'::text, 'succeeded'::text, 'failed'::text, 'lost'::text, 'cancelled'::text])));

CREATE DOMAIN public.job_failure_code AS text
	CONSTRAINT job_failure_code_check CHECK ((VALUE = ANY (ARRAY['no_capacity'::text, 'lease_expired'::text, 'download_failed'::text, 'upload_failed'::text, 'provider_offline'::text, 'internal_error'::text, 'runner_failed'::text, 'verification_failed'::text, 'commit_conflict'::text, 'buyer_cancelled'::text, 'admission_expired'::text])));

CREATE DOMAIN public.job_status AS text
	CONSTRAINT job_status_check CHECK ((VALUE = ANY (ARRAY['queued'::text, 'active'::text, 'verifying'::text, 'cancelling'::text, 'succeeded'::text, 'cancelled'::text, 'failed'::text])));

CREATE DOMAIN public.sha256_hex AS text
	CONSTRAINT sha256_hex_check CHECK ((VALUE ~ '^[0-9a-f]{64}$'::text));

CREATE FUNCTION public.refuse_status_write() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        RAISE EXCEPTION 'illegal % insert with status %', TG_ARGV[0], NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RAISE EXCEPTION 'illegal % transition % -> %', TG_ARGV[0], OLD.status, NEW.status
        USING ERRCODE = 'check_violation';
END;
$$;

CREATE FUNCTION public.rendermac_fence_one(n bigint, what text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF n IS DISTINCT FROM 1 THEN
        RAISE EXCEPTION '%: fence matched % rows', what, n USING ERRCODE = 'RMF01';
    END IF;
END
$$;

CREATE FUNCTION public.status_transition_allowed(entity text, from_status text, to_status text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
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

CREATE TABLE public.api_keys (
    id uuid NOT NULL,
    buyer_id uuid NOT NULL,
    key_hash text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT api_keys_key_hash_check CHECK ((key_hash ~ '^[0-9a-f]{64}$'::text))
);

CREATE TABLE public.buyers (
    id uuid NOT NULL,
    name text NOT NULL,
    balance_cents bigint NOT NULL,
    captured_cents bigint DEFAULT 0 NOT NULL,
    initial_cents bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    webhook_url text,
    CONSTRAINT buyers_balance_cents_check CHECK ((balance_cents >= 0)),
    CONSTRAINT buyers_captured_cents_check CHECK ((captured_cents >= 0)),
    CONSTRAINT buyers_initial_cents_check CHECK ((initial_cents >= 0)),
    CONSTRAINT buyers_webhook_url_check CHECK (((webhook_url ~ '^https?://[^[:space:]]+$'::text) AND (octet_length(webhook_url) <= 2048)))
);

CREATE TABLE public.device_events (
    id bigint NOT NULL,
    device_id uuid NOT NULL,
    action text NOT NULL,
    actor text NOT NULL,
    operator_id uuid,
    at timestamp with time zone NOT NULL,
    CONSTRAINT device_events_action_check CHECK ((action = ANY (ARRAY['drain'::text, 'revoke'::text]))),
    CONSTRAINT device_events_actor_check CHECK ((actor = ANY (ARRAY['operator'::text, 'admin'::text]))),
    CONSTRAINT device_events_check CHECK (((actor = 'operator'::text) = (operator_id IS NOT NULL)))
);

CREATE SEQUENCE public.device_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.device_events_id_seq OWNED BY public.device_events.id;

CREATE TABLE public.devices (
    id uuid NOT NULL,
    name text NOT NULL,
    token_hash text,
    services text[] NOT NULL,
    slots_total integer NOT NULL,
    status text DEFAULT 'offline'::text NOT NULL,
    last_seen_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    drain_requested_at timestamp with time zone,
    CONSTRAINT devices_slots_total_check CHECK ((slots_total >= 1)),
    CONSTRAINT devices_status_check CHECK ((status = ANY (ARRAY['online'::text, 'offline'::text, 'revoked'::text])))
)
WITH (fillfactor='50');

CREATE TABLE public.holds (
    job_id uuid NOT NULL,
    buyer_id uuid NOT NULL,
    amount_cents bigint NOT NULL,
    status text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    settled_at timestamp with time zone,
    CONSTRAINT holds_amount_cents_check CHECK ((amount_cents >= 0)),
    CONSTRAINT holds_check CHECK (((status = 'held'::text) = (settled_at IS NULL))),
    CONSTRAINT holds_status_check CHECK ((status = ANY (ARRAY['held'::text, 'captured'::text, 'released'::text])))
);

CREATE TABLE public.job_attempts (
    id uuid NOT NULL,
    job_id uuid NOT NULL,
    attempt_number integer NOT NULL,
    device_id uuid NOT NULL,
    status public.attempt_status NOT NULL,
    lease_epoch integer NOT NULL,
    commit_token_hash public.sha256_hex NOT NULL,
    lease_expires_at timestamp with time zone NOT NULL,
    claimed_output_key text,
    claimed_output_bytes bigint,
    claimed_output_sha256 text,
    failure_code public.attempt_failure_code,
    created_at timestamp with time zone NOT NULL,
    ended_at timestamp with time zone,
    encoder text,
    verify_message text,
    failure_message text,
    CONSTRAINT job_attempts_attempt_number_check CHECK ((attempt_number >= 1)),
    CONSTRAINT job_attempts_check CHECK ((((status)::text = ANY (ARRAY['succeeded'::text, 'failed'::text, 'lost'::text, 'cancelled'::text])) = (ended_at IS NOT NULL))),
    CONSTRAINT job_attempts_check1 CHECK ((((status)::text <> ALL (ARRAY['committing'::text, 'succeeded'::text])) OR (claimed_output_key IS NOT NULL))),
    CONSTRAINT job_attempts_encoder_check CHECK (((octet_length(encoder) >= 1) AND (octet_length(encoder) <= 64))),
    CONSTRAINT job_attempts_failure_message_check CHECK ((octet_length(failure_message) <= 512)),
    CONSTRAINT job_attempts_lease_epoch_check CHECK ((lease_epoch >= 1)),
    CONSTRAINT job_attempts_verify_message_check CHECK (((octet_length(verify_message) >= 1) AND (octet_length(verify_message) <= 512)))
)
WITH (fillfactor='70');

CREATE TABLE public.job_events (
    id bigint NOT NULL,
    kind text NOT NULL,
    job_id uuid NOT NULL,
    attempt_id uuid,
    from_status text,
    to_status text NOT NULL,
    code text DEFAULT ''::text NOT NULL,
    actor text NOT NULL,
    at timestamp with time zone NOT NULL,
    operator_id uuid,
    CONSTRAINT job_events_actor_check CHECK ((actor = ANY (ARRAY['buyer'::text, 'matcher'::text, 'device'::text, 'verifier'::text, 'sweeper'::text, 'operator'::text]))),
    CONSTRAINT job_events_check CHECK (((kind = 'attempt'::text) = (attempt_id IS NOT NULL))),
    CONSTRAINT job_events_kind_check CHECK ((kind = ANY (ARRAY['job'::text, 'attempt'::text]))),
    CONSTRAINT job_events_operator_named CHECK (((actor = 'operator'::text) = (operator_id IS NOT NULL)))
);

CREATE SEQUENCE public.job_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.job_events_id_seq OWNED BY public.job_events.id;

CREATE TABLE public.jobs (
    id uuid NOT NULL,
    buyer_id uuid NOT NULL,
    service text NOT NULL,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    input_bytes bigint NOT NULL,
    input_sha256 public.sha256_hex NOT NULL,
    max_attempts integer NOT NULL,
    attempt_count integer DEFAULT 0 NOT NULL,
    status public.job_status NOT NULL,
    failure_code public.job_failure_code,
    idempotency_key text,
    request_fingerprint public.sha256_hex NOT NULL,
    created_at timestamp with time zone NOT NULL,
    admission_deadline timestamp with time zone NOT NULL,
    output_key text,
    output_bytes bigint,
    output_sha256 public.sha256_hex,
    succeeded_attempt_id uuid,
    updated_at timestamp with time zone NOT NULL,
    withdrawn_count integer DEFAULT 0 NOT NULL,
    CONSTRAINT jobs_attempts_spent_check CHECK (((withdrawn_count >= 0) AND (attempt_count >= withdrawn_count) AND ((attempt_count - withdrawn_count) <= max_attempts))),
    CONSTRAINT jobs_check1 CHECK ((admission_deadline > created_at)),
    CONSTRAINT jobs_check2 CHECK ((((status)::text = 'succeeded'::text) = (succeeded_attempt_id IS NOT NULL))),
    CONSTRAINT jobs_check3 CHECK ((((status)::text = 'succeeded'::text) = ((output_key IS NOT NULL) AND (output_bytes IS NOT NULL) AND (output_sha256 IS NOT NULL)))),
    CONSTRAINT jobs_check4 CHECK ((((status)::text = 'failed'::text) = (failure_code IS NOT NULL))),
    CONSTRAINT jobs_idempotency_key_check CHECK (((octet_length(idempotency_key) >= 1) AND (octet_length(idempotency_key) <= 200))),
    CONSTRAINT jobs_input_bytes_check CHECK ((input_bytes >= 0)),
    CONSTRAINT jobs_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 10))),
    CONSTRAINT jobs_output_bytes_check CHECK ((output_bytes >= 0))
);

CREATE TABLE public.operators (
    id uuid NOT NULL,
    name text NOT NULL,
    token_hash text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT operators_name_check CHECK (((octet_length(name) >= 1) AND (octet_length(name) <= 200))),
    CONSTRAINT operators_token_hash_check CHECK ((token_hash ~ '^[0-9a-f]{64}$'::text))
);

CREATE TABLE public.pairing_codes (
    code_hash text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone,
    device_id uuid,
    code_id text,
    wrong_guesses integer DEFAULT 0 NOT NULL,
    burned_at timestamp with time zone,
    CONSTRAINT pairing_codes_check CHECK ((expires_at > created_at)),
    CONSTRAINT pairing_codes_check1 CHECK (((used_at IS NULL) = (device_id IS NULL))),
    CONSTRAINT pairing_codes_check2 CHECK (((used_at IS NULL) OR (burned_at IS NULL))),
    CONSTRAINT pairing_codes_code_hash_check CHECK ((code_hash ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT pairing_codes_code_id_check CHECK ((code_id ~ '^[A-HJ-NP-Z2-9]{8}$'::text)),
    CONSTRAINT pairing_codes_wrong_guesses_check CHECK ((wrong_guesses >= 0))
);

CREATE TABLE public.paused_services (
    service text NOT NULL,
    paused_at timestamp with time zone NOT NULL,
    operator_id uuid NOT NULL,
    CONSTRAINT paused_services_service_check CHECK (((octet_length(service) >= 1) AND (octet_length(service) <= 64)))
);

CREATE TABLE public.service_pause_events (
    seq bigint NOT NULL,
    service text NOT NULL,
    action text NOT NULL,
    actor text NOT NULL,
    operator_id uuid NOT NULL,
    at timestamp with time zone NOT NULL,
    CONSTRAINT service_pause_events_action_check CHECK ((action = ANY (ARRAY['pause'::text, 'resume'::text]))),
    CONSTRAINT service_pause_events_actor_check CHECK ((actor = 'operator'::text)),
    CONSTRAINT service_pause_events_service_check CHECK (((octet_length(service) >= 1) AND (octet_length(service) <= 64)))
);

CREATE SEQUENCE public.service_pause_events_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.service_pause_events_seq_seq OWNED BY public.service_pause_events.seq;

CREATE TABLE public.webhook_outbox (
    id bigint NOT NULL,
    job_id uuid NOT NULL,
    event text NOT NULL,
    payload jsonb NOT NULL,
    created_at timestamp with time zone NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone NOT NULL,
    delivered_at timestamp with time zone,
    last_error text,
    CONSTRAINT webhook_outbox_attempts_check CHECK ((attempts >= 0))
);

CREATE SEQUENCE public.webhook_outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.webhook_outbox_id_seq OWNED BY public.webhook_outbox.id;

ALTER TABLE ONLY public.device_events ALTER COLUMN id SET DEFAULT nextval('public.device_events_id_seq'::regclass);

ALTER TABLE ONLY public.job_events ALTER COLUMN id SET DEFAULT nextval('public.job_events_id_seq'::regclass);

ALTER TABLE ONLY public.service_pause_events ALTER COLUMN seq SET DEFAULT nextval('public.service_pause_events_seq_seq'::regclass);

ALTER TABLE ONLY public.webhook_outbox ALTER COLUMN id SET DEFAULT nextval('public.webhook_outbox_id_seq'::regclass);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_key_hash_key UNIQUE (key_hash);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.buyers
    ADD CONSTRAINT buyers_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.device_events
    ADD CONSTRAINT device_events_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.devices
    ADD CONSTRAINT devices_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.devices
    ADD CONSTRAINT devices_token_hash_key UNIQUE (token_hash);

ALTER TABLE ONLY public.holds
    ADD CONSTRAINT holds_pkey PRIMARY KEY (job_id);

ALTER TABLE ONLY public.job_attempts
    ADD CONSTRAINT job_attempts_commit_token_hash_key UNIQUE (commit_token_hash);

ALTER TABLE ONLY public.job_attempts
    ADD CONSTRAINT job_attempts_job_id_attempt_number_key UNIQUE (job_id, attempt_number);

ALTER TABLE ONLY public.job_attempts
    ADD CONSTRAINT job_attempts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.job_events
    ADD CONSTRAINT job_events_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_buyer_id_idempotency_key_key UNIQUE (buyer_id, idempotency_key);

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.operators
    ADD CONSTRAINT operators_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.operators
    ADD CONSTRAINT operators_token_hash_key UNIQUE (token_hash);

ALTER TABLE ONLY public.pairing_codes
    ADD CONSTRAINT pairing_codes_code_id_key UNIQUE (code_id);

ALTER TABLE ONLY public.pairing_codes
    ADD CONSTRAINT pairing_codes_device_id_key UNIQUE (device_id);

ALTER TABLE ONLY public.pairing_codes
    ADD CONSTRAINT pairing_codes_pkey PRIMARY KEY (code_hash);

ALTER TABLE ONLY public.paused_services
    ADD CONSTRAINT paused_services_pkey PRIMARY KEY (service);

ALTER TABLE ONLY public.service_pause_events
    ADD CONSTRAINT service_pause_events_pkey PRIMARY KEY (seq);

ALTER TABLE ONLY public.webhook_outbox
    ADD CONSTRAINT webhook_outbox_pkey PRIMARY KEY (id);

CREATE INDEX device_events_device_idx ON public.device_events USING btree (device_id, id);

CREATE INDEX holds_buyer_idx ON public.holds USING btree (buyer_id) WHERE (status = 'held'::text);

CREATE INDEX job_attempts_live_device_idx ON public.job_attempts USING btree (device_id) WHERE (ended_at IS NULL);

CREATE UNIQUE INDEX job_attempts_one_live_idx ON public.job_attempts USING btree (job_id) WHERE (ended_at IS NULL);

CREATE INDEX job_events_job_idx ON public.job_events USING btree (job_id, id);

CREATE INDEX job_events_terminal_idx ON public.job_events USING btree (at) WHERE ((kind = 'job'::text) AND (to_status = ANY (ARRAY['succeeded'::text, 'cancelled'::text, 'failed'::text])));

CREATE INDEX jobs_buyer_idx ON public.jobs USING btree (buyer_id, created_at);

CREATE INDEX jobs_queued_deadline_idx ON public.jobs USING btree (admission_deadline) WHERE ((status)::text = 'queued'::text);

CREATE INDEX jobs_queued_idx ON public.jobs USING btree (created_at, id) WHERE ((status)::text = 'queued'::text);

CREATE INDEX jobs_unended_idx ON public.jobs USING btree (status) WHERE ((status)::text = ANY (ARRAY['queued'::text, 'active'::text, 'verifying'::text, 'cancelling'::text]));

CREATE INDEX webhook_outbox_pending_idx ON public.webhook_outbox USING btree (next_attempt_at) WHERE (delivered_at IS NULL);

CREATE UNIQUE INDEX webhook_outbox_terminal_idx ON public.webhook_outbox USING btree (job_id) WHERE (event = ANY (ARRAY['succeeded'::text, 'cancelled'::text, 'failed'::text]));

CREATE TRIGGER job_attempts_status_insert BEFORE INSERT ON public.job_attempts FOR EACH ROW WHEN (((new.status)::text IS DISTINCT FROM 'leased'::text)) EXECUTE FUNCTION public.refuse_status_write('attempt');

CREATE TRIGGER job_attempts_status_transition BEFORE UPDATE OF status ON public.job_attempts FOR EACH ROW WHEN ((((old.status)::text IS DISTINCT FROM (new.status)::text) AND (NOT COALESCE(((((old.status)::text || '>'::text) || (new.status)::text) = ANY ('{leased>downloading,leased>running,leased>uploading,leased>failed,leased>lost,leased>cancelled,downloading>running,downloading>uploading,downloading>failed,downloading>lost,downloading>cancelled,running>uploading,running>failed,running>lost,running>cancelled,uploading>committing,uploading>failed,uploading>lost,uploading>cancelled,committing>succeeded,committing>failed,committing>cancelled}'::text[])), false)))) EXECUTE FUNCTION public.refuse_status_write('attempt');

CREATE TRIGGER jobs_status_insert BEFORE INSERT ON public.jobs FOR EACH ROW WHEN (((new.status)::text IS DISTINCT FROM 'queued'::text)) EXECUTE FUNCTION public.refuse_status_write('job');

CREATE TRIGGER jobs_status_transition BEFORE UPDATE OF status ON public.jobs FOR EACH ROW WHEN ((((old.status)::text IS DISTINCT FROM (new.status)::text) AND (NOT COALESCE(((((old.status)::text || '>'::text) || (new.status)::text) = ANY ('{queued>active,queued>cancelled,queued>failed,active>queued,active>verifying,active>cancelling,active>failed,verifying>succeeded,verifying>cancelling,verifying>failed,cancelling>cancelled,cancelling>failed}'::text[])), false)))) EXECUTE FUNCTION public.refuse_status_write('job');

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_buyer_id_fkey FOREIGN KEY (buyer_id) REFERENCES public.buyers(id);

ALTER TABLE ONLY public.device_events
    ADD CONSTRAINT device_events_device_id_fkey FOREIGN KEY (device_id) REFERENCES public.devices(id);

ALTER TABLE ONLY public.device_events
    ADD CONSTRAINT device_events_operator_id_fkey FOREIGN KEY (operator_id) REFERENCES public.operators(id);

ALTER TABLE ONLY public.holds
    ADD CONSTRAINT holds_buyer_id_fkey FOREIGN KEY (buyer_id) REFERENCES public.buyers(id);

ALTER TABLE ONLY public.holds
    ADD CONSTRAINT holds_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.jobs(id);

ALTER TABLE ONLY public.job_attempts
    ADD CONSTRAINT job_attempts_device_id_fkey FOREIGN KEY (device_id) REFERENCES public.devices(id);

ALTER TABLE ONLY public.job_attempts
    ADD CONSTRAINT job_attempts_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.jobs(id);

ALTER TABLE ONLY public.job_events
    ADD CONSTRAINT job_events_attempt_id_fkey FOREIGN KEY (attempt_id) REFERENCES public.job_attempts(id);

ALTER TABLE ONLY public.job_events
    ADD CONSTRAINT job_events_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.jobs(id);

ALTER TABLE ONLY public.job_events
    ADD CONSTRAINT job_events_operator_id_fkey FOREIGN KEY (operator_id) REFERENCES public.operators(id);

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_buyer_id_fkey FOREIGN KEY (buyer_id) REFERENCES public.buyers(id);

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_succeeded_attempt_fk FOREIGN KEY (succeeded_attempt_id) REFERENCES public.job_attempts(id);

ALTER TABLE ONLY public.pairing_codes
    ADD CONSTRAINT pairing_codes_device_id_fkey FOREIGN KEY (device_id) REFERENCES public.devices(id);

ALTER TABLE ONLY public.paused_services
    ADD CONSTRAINT paused_services_operator_id_fkey FOREIGN KEY (operator_id) REFERENCES public.operators(id);

ALTER TABLE ONLY public.service_pause_events
    ADD CONSTRAINT service_pause_events_operator_id_fkey FOREIGN KEY (operator_id) REFERENCES public.operators(id);

ALTER TABLE ONLY public.webhook_outbox
    ADD CONSTRAINT webhook_outbox_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.jobs(id);

