-- What the HTTP API and the webhook deliverer add to the contract's tables:
-- a buyer's webhook endpoint and single-use pairing codes for devices.

-- +goose Up

-- webhook_url is where the buyer's terminal events are POSTed; null means
-- the buyer takes no webhooks (their outbox rows are marked delivered with
-- last_error 'no webhook url'). No secret is stored for it: the signing
-- secret is derived as HMAC(server signing key, buyer id), see
-- server/webhook.
ALTER TABLE buyers ADD COLUMN webhook_url text
    CHECK (webhook_url ~ '^https?://[^[:space:]]+$' AND octet_length(webhook_url) <= 2048);

-- A pairing code lets one device pair once before it expires. Only the hash
-- of the code is stored, like every other credential. A used code records
-- when and which device it paired, so an operator can audit it.
CREATE TABLE pairing_codes (
    code_hash  text        PRIMARY KEY CHECK (code_hash ~ '^[0-9a-f]{64}$'),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL CHECK (expires_at > created_at),
    used_at    timestamptz,
    device_id  uuid        UNIQUE REFERENCES devices (id),
    -- used exactly when it paired a device.
    CHECK ((used_at IS NULL) = (device_id IS NULL))
);

-- +goose Down

DROP TABLE pairing_codes;
ALTER TABLE buyers DROP COLUMN webhook_url;
