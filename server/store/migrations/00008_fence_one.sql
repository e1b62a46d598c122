-- A fenced write refuses its own transaction (issue 32).
--
-- Every write that must hit exactly one row (a fence: an attempt's status
-- write under its device and epoch, a job's status write under the status
-- it was locked in, a buyer's debit, a hold's settlement...) was checked in
-- Go, on the command tag, after the write had run and before COMMIT was
-- sent: so COMMIT took a round trip of its own. The service now sends such
-- a write as
--
--     WITH fenced AS (<the write> RETURNING 1)
--     SELECT rendermac_fence_one(count(*), <what>) FROM fenced
--
-- and this function raises when the count is not 1, so that Postgres
-- aborts the transaction before the COMMIT queued behind it in the same
-- round trip can run: a pipeline skips every statement after an error up
-- to its sync. The server maps the error (SQLSTATE RMF01) to its internal
-- error, as it did the Go check. Nothing is refused that was allowed
-- before, and nothing allowed that was refused: the count is the command
-- tag's.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION rendermac_fence_one(n bigint, what text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF n IS DISTINCT FROM 1 THEN
        RAISE EXCEPTION '%: fence matched % rows', what, n USING ERRCODE = 'RMF01';
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION rendermac_fence_one(bigint, text);
