-- Why an attempt failed, in the device's words (issue 49).
--
-- A fail frame has always carried a message (the runner's error, the tail
-- of its output), but the control plane dropped it: a buyer whose job
-- failed runner_failed saw the code and nothing else, and the reason was
-- only in the agent's log. The gateway now stores the message, cleaned of
-- secrets and cut to 512 bytes (protocol.CleanFailMessage), on the attempt
-- it ended; GET /v1/jobs/{id} and the console show it. The CHECK holds the
-- bound whatever writes the row.

-- +goose Up

ALTER TABLE job_attempts
    ADD COLUMN failure_message text CHECK (octet_length(failure_message) <= 512);

-- +goose Down

ALTER TABLE job_attempts DROP COLUMN failure_message;
