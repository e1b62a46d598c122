-- Bounded guessing of pairing codes. A code is now an 8-symbol id plus a
-- 16-symbol secret (XXXX-XXXX-SSSS-SSSS-SSSS-SSSS). The id is not a secret:
-- it names the code's row, so a wrong guess at a known id can be counted
-- against that code, and a code that took max wrong guesses is burned
-- (unusable, even with the right secret). code_hash still covers the whole
-- code. Codes minted before this migration have no id and are redeemed by
-- hash as before; they expire within their short TTL.

-- +goose Up

ALTER TABLE pairing_codes
    ADD COLUMN code_id       text UNIQUE CHECK (code_id ~ '^[A-HJ-NP-Z2-9]{8}$'),
    ADD COLUMN wrong_guesses integer NOT NULL DEFAULT 0 CHECK (wrong_guesses >= 0),
    ADD COLUMN burned_at     timestamptz,
    -- a code pairs a device or is burned, never both.
    ADD CHECK (used_at IS NULL OR burned_at IS NULL);

-- +goose Down

ALTER TABLE pairing_codes DROP COLUMN burned_at, DROP COLUMN wrong_guesses, DROP COLUMN code_id;
