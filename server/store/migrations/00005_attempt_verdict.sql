-- What verification found on an attempt's output (issue 29): the encoder
-- the output's video stream names (libx264, hevc_videotoolbox...), read by
-- ffprobe, and the reason a verification failed ("codec: want h264, got
-- hevc"). Both are shown in the job's view; neither is part of the
-- contract's state, so the model has no counterpart and snapshots omit them.

-- +goose Up
ALTER TABLE job_attempts
    ADD COLUMN encoder        text CHECK (octet_length(encoder) BETWEEN 1 AND 64),
    ADD COLUMN verify_message text CHECK (octet_length(verify_message) BETWEEN 1 AND 512);

-- +goose Down
ALTER TABLE job_attempts DROP COLUMN encoder, DROP COLUMN verify_message;
