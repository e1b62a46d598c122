-- An attempt's writes on the happy path become HOT (issue 32).
--
-- Postgres updates a row in place, without a new entry in each of the
-- table's indexes ("heap-only tuple", HOT), only when the update changes no
-- column any index of the table names, in its key or in its WHERE, and the
-- new version fits on the same page. Every status write of job_attempts
-- changed a column the three live-attempt indexes of 00001 name in their
-- WHERE (status IN the live statuses), and every lease renewal one that
-- job_attempts_live_expiry_idx keys on (lease_expires_at), so the attempt's
-- insert and each of its progress frames, commit transaction 1 and its end
-- wrote six index entries: about twenty per job.
--
-- So, with nothing allowed that was refused before:
--   * the two live-attempt indexes take "ended_at IS NULL" as their WHERE.
--     The row rule of 00001, CHECK ((status IN ('succeeded', 'failed',
--     'lost', 'cancelled')) = (ended_at IS NOT NULL)), with the
--     attempt_status domain (00004: exactly the nine statuses), makes it
--     the same set of rows as "status IN the live statuses": a row
--     that is in one and not the other is refused as a check_violation. So
--     job_attempts_one_live_idx still refuses a second live attempt of a
--     job (invariant 1), under the same name. A phase change (leased ->
--     downloading -> running -> uploading -> committing) changes neither
--     column and no index key, and is HOT when the page has room; only the
--     attempt's end writes index entries;
--   * job_attempts_live_expiry_idx goes: its key changed with every lease
--     renewal. The sweeper's two expiry scans read the live attempts
--     through job_attempts_live_device_idx instead (their WHERE says
--     ended_at IS NULL too), a set as small as the fleet's busy slots;
--   * job_attempts and devices (whose heartbeat is a frequent in-place
--     write) leave room on each page for the new versions: fillfactor 70
--     and 50. It applies to pages written from now on.
-- Statements that look live attempts up say "ended_at IS NULL AND status
-- IN ..." (store.SQLUnended), so that the planner can use these indexes.

-- +goose Up

DROP INDEX job_attempts_one_live_idx;
CREATE UNIQUE INDEX job_attempts_one_live_idx ON job_attempts (job_id) WHERE ended_at IS NULL;
DROP INDEX job_attempts_live_device_idx;
CREATE INDEX job_attempts_live_device_idx ON job_attempts (device_id) WHERE ended_at IS NULL;
DROP INDEX job_attempts_live_expiry_idx;

ALTER TABLE job_attempts SET (fillfactor = 70);
ALTER TABLE devices SET (fillfactor = 50);

-- +goose Down

ALTER TABLE devices RESET (fillfactor);
ALTER TABLE job_attempts RESET (fillfactor);

DROP INDEX job_attempts_one_live_idx;
CREATE UNIQUE INDEX job_attempts_one_live_idx ON job_attempts (job_id)
    WHERE status IN ('leased', 'downloading', 'running', 'uploading', 'committing');
DROP INDEX job_attempts_live_device_idx;
CREATE INDEX job_attempts_live_device_idx ON job_attempts (device_id)
    WHERE status IN ('leased', 'downloading', 'running', 'uploading', 'committing');
CREATE INDEX job_attempts_live_expiry_idx ON job_attempts (lease_expires_at)
    WHERE status IN ('leased', 'downloading', 'running', 'uploading', 'committing');
