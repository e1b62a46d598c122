package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
)

// The SQL facts every statement of the control plane shares (the service
// layer, the gateway, the API, the deliverer and the invariant checks):
// each is written here once and spliced into the statements as text, so
// the statement Postgres plans is the same literal SQL it always was (a
// partial index on the live statuses is still chosen). The status lists
// are built from protocol's constants, and facts_test.go checks them and
// the migrations' copies against protocol's predicates.
const (
	// SQLLiveStatuses is the SQL list of live attempt statuses, those that
	// still hold authority (protocol.AttemptStatus.Live: leased..committing),
	// for `status IN ` + SQLLiveStatuses.
	SQLLiveStatuses = `(` + SQLLeasePhaseList + `, '` + string(protocol.AttemptCommitting) + `')`

	// SQLUnended is the WHERE of the live-attempt partial indexes
	// (migration 00007): the row CHECK of job_attempts ties ended_at to the
	// terminal statuses, so an attempt is live exactly while it holds.
	// Statements that look live attempts up say SQLUnended + ` AND status
	// IN ` + SQLLiveStatuses, so that the planner can use those indexes and
	// the status list still says what they mean.
	SQLUnended = `ended_at IS NULL`

	// SQLLeasePhases is the SQL list of the lease phases, the live
	// statuses a lease can renew or expire in (protocol.AttemptStatus.
	// LeasePhase: leased..uploading).
	SQLLeasePhases = `(` + SQLLeasePhaseList + `)`

	// SQLLeasePhaseList is the lease phases in rank order, unparenthesised.
	SQLLeasePhaseList = `'` + string(protocol.AttemptLeased) + `', '` + string(protocol.AttemptDownloading) + `', '` +
		string(protocol.AttemptRunning) + `', '` + string(protocol.AttemptUploading) + `'`

	// SQLPhaseRanks is the lease phases as a text array in rank order:
	// array_position(SQLPhaseRanks, s) is protocol.PhaseRank(s), NULL for
	// anything that is not a lease phase.
	SQLPhaseRanks = `'{` + string(protocol.AttemptLeased) + `,` + string(protocol.AttemptDownloading) + `,` +
		string(protocol.AttemptRunning) + `,` + string(protocol.AttemptUploading) + `}'::text[]`

	// SQLHeartbeatSet is the SET list of a device heartbeat: the device is
	// online and was seen at the statement's instant, which the statement
	// names t.now (a CTE or FROM item t with a column now). Its WHERE
	// includes SQLHeartbeatGuard.
	SQLHeartbeatSet = `last_seen_at = t.now, status = '` + string(protocol.DeviceOnline) + `'`

	// SQLHeartbeatGuard keeps a heartbeat off a revoked device: revoked
	// stays revoked, a heartbeat never resurrects it.
	SQLHeartbeatGuard = `status <> '` + string(protocol.DeviceRevoked) + `'`

	// SQLHeartbeat heartbeats device $1 at $2 (NULL: the database clock).
	SQLHeartbeat = `
UPDATE devices SET ` + SQLHeartbeatSet + ` FROM (SELECT coalesce($2::timestamptz, now()) AS now) t
WHERE id = $1 AND ` + SQLHeartbeatGuard

	// SQLJournalInsert is the head of every insert into the journal; the
	// VALUES or SELECT that follows gives the columns in this order.
	SQLJournalInsert = `INSERT INTO job_events (kind, job_id, attempt_id, from_status, to_status, code, actor, at)`

	// SQLNotify sends payload $2 on channel $1. A NOTIFY is delivered at
	// COMMIT, so inside a transaction it announces only what committed.
	SQLNotify = `SELECT pg_notify($1, $2)`

	// SQLNow is the decision instant: $1 when the caller pins it, else the
	// database's clock. Statements that take their instant as an argument
	// write the same coalesce($n::timestamptz, now()) with NowArg.
	SQLNow = `SELECT coalesce($1::timestamptz, now())`
)

// RowQuerier is a pool, a connection or a transaction.
type RowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// NowArg is now as the argument of a coalesce($n::timestamptz, now()): NULL
// (the database clock) for the zero time, else now in stored form.
func NowArg(now time.Time) any {
	if now.IsZero() {
		return nil
	}
	return clock.Stored(now)
}

// ResolveNow returns now in stored form, or the database's clock when now
// is zero: the database is the single authority on time, so processes with
// skewed clocks agree. A transaction that reads it decides everything at
// that one instant.
func ResolveNow(ctx context.Context, q RowQuerier, now time.Time) (time.Time, error) {
	if !now.IsZero() {
		return clock.Stored(now), nil
	}
	var db time.Time
	if err := q.QueryRow(ctx, SQLNow, nil).Scan(&db); err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", err)
	}
	return db.UTC(), nil
}
