package gateway

import "github.com/rendermac/rendermac/server/store"

// The gateway's own SQL. Every decision about jobs and attempts belongs to
// the service layer; these statements only authenticate, describe and
// heartbeat devices and find cancel targets.
const (
	// A revoked device is refused exactly like an unknown token.
	sqlAuthDevice = `SELECT id::text FROM devices WHERE token_hash = $1 AND status <> 'revoked'`

	// Locked first, as Lease locks it, so counting live attempts and
	// updating slots_total cannot race a concurrent Lease of the same device:
	// the update that counts them is the next statement, in a snapshot
	// taken once the lock is held.
	sqlLockDeviceForHello = `SELECT status FROM devices WHERE id = $1 FOR UPDATE`

	sqlCountLive = `
SELECT count(*) FROM job_attempts
WHERE device_id = $1 AND ` + store.SQLUnended + ` AND status IN ` + store.SQLLiveStatuses

	// hello describes what the device offers now. slots_total never drops
	// below the live attempts, so invariant 9 holds while an agent that
	// shrank its slots finishes what it holds; Lease then gives it nothing
	// until it is below the new total. It is a heartbeat too, at $4 (NULL:
	// the database clock), and like every heartbeat leaves a revoked device
	// alone (no row: ok false).
	sqlDescribeDevice = `
UPDATE devices SET services = $2, slots_total = greatest($3::int, (` + sqlCountLive + `)::int), ` + store.SQLHeartbeatSet + `
FROM (SELECT coalesce($4::timestamptz, now()) AS now) t
WHERE id = $1 AND ` + store.SQLHeartbeatGuard + `
RETURNING drain_requested_at IS NOT NULL`

	// sqlPendingDrains: the given devices with a drain not yet delivered.
	sqlPendingDrains = `SELECT id::text FROM devices WHERE id = ANY($1::uuid[]) AND drain_requested_at IS NOT NULL ORDER BY id`

	// sqlDrainDelivered clears a device's drain request once its frame
	// was written.
	sqlDrainDelivered = `UPDATE devices SET drain_requested_at = NULL WHERE id = $1`

	// Live attempts of cancelling jobs on the given devices: the cancel
	// notices a session or the listener may have missed.
	sqlPendingCancels = `
SELECT a.job_id::text, a.id::text, a.device_id::text FROM job_attempts a JOIN jobs j ON j.id = a.job_id
WHERE j.status = 'cancelling' AND a.device_id = ANY($1::uuid[])
  AND a.` + store.SQLUnended + ` AND a.status IN ` + store.SQLLiveStatuses + `
ORDER BY a.job_id`

	sqlLiveAttemptDevice = `
SELECT id::text, device_id::text FROM job_attempts
WHERE job_id = $1 AND ` + store.SQLUnended + ` AND status IN ` + store.SQLLiveStatuses

	// The poll fallback: which services have leasable work.
	sqlQueuedServices = `
SELECT DISTINCT service FROM jobs WHERE status = 'queued' AND admission_deadline > coalesce($1::timestamptz, now())`

	// A transaction-scoped advisory lock: held for one sweep pass, released
	// by commit, rollback or a dead connection, so a crashed gateway never
	// keeps the others from sweeping.
	sqlTrySweepLock = `SELECT pg_try_advisory_xact_lock($1)`
)

// The dbstat operation names of the gateway's own database work.
const (
	OpHello          = "hello"
	OpTouch          = "touch"
	OpPendingCancels = "pending_cancels"
	OpAuth           = "auth"
	OpPoll           = "poll"
	OpLostLookup     = "lost_lookup"
	OpDrain          = "drain"
)

// sweepLockKey is the advisory lock key of the sweeper ("rendmcsw" in ASCII).
const sweepLockKey int64 = 0x72656e646d637377
