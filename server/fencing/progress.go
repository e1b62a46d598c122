package fencing

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/store"
)

// sqlProgress is a whole Progress in one statement, so in one implicit
// transaction and one round trip. It locks the job, then the attempt (the
// order of doc.go: a references j, u references a, h references u, so each
// CTE runs after the one it reads), renews the lease and sets the phase
// only if every check of docs/semantics.md passes, journals a changed
// phase and heartbeats the device last. It returns the locked rows as they
// were before the write, and whether the write happened: Go decides the
// reply from the former with the same ordered checks and requires the
// latter to agree (ErrInternal otherwise).
//
// The write's WHERE is the full fence on the attempt row (device, epoch,
// unexpired; its status is read from a, the same row as locked, so that
// the planner cannot take a partial index on the live statuses for a
// primary-key lookup) and no phase regression, plus the locked job not
// cancelling, so at READ COMMITTED a concurrent writer that committed
// between the snapshot and the lock is re-checked against the newest row.
// The phase ranks are store.SQLPhaseRanks, protocol.PhaseRank's (an
// unknown phase ranks 0).
//
// $1 job, $2 attempt, $3 device, $4 epoch, $5 phase, $6 now (NULL: the
// database clock), $7 LeaseTTL in microseconds, $8 the journal's actor.
const sqlProgress = `
WITH t AS (SELECT coalesce($6::timestamptz, now()) AS now),
j AS (SELECT id, status FROM jobs WHERE id = $1 FOR UPDATE),
a AS (
    SELECT id, job_id, device_id, status, lease_epoch, lease_expires_at FROM job_attempts
    WHERE id = $2 AND job_id = (SELECT id FROM j) FOR UPDATE),
u AS (
    UPDATE job_attempts x SET status = $5, lease_expires_at = t.now + $7::bigint * interval '1 microsecond'
    FROM t, a, j
    WHERE x.id = $2 AND x.id = a.id AND x.job_id = j.id AND x.device_id = $3 AND x.lease_epoch = $4
      AND a.status IN ` + store.SQLLeasePhases + `
      AND j.status <> 'cancelling'
      AND t.now < x.lease_expires_at
      AND coalesce(array_position(` + store.SQLPhaseRanks + `, $5::text), 0)
          >= array_position(` + store.SQLPhaseRanks + `, a.status)
    RETURNING x.lease_expires_at, a.status AS old_status),
e AS (
    ` + store.SQLJournalInsert + `
    SELECT 'attempt', $1, $2, u.old_status, $5, '', $8, t.now FROM u, t WHERE u.old_status <> $5),
h AS (
    UPDATE devices SET ` + store.SQLHeartbeatSet + ` FROM t
    WHERE id = $3 AND ` + store.SQLHeartbeatGuard + ` AND EXISTS (SELECT 1 FROM u))
SELECT t.now, j.status, a.id::text, a.device_id::text, a.status, a.lease_epoch, a.lease_expires_at,
       (SELECT lease_expires_at FROM u)
FROM t LEFT JOIN j ON true LEFT JOIN a ON true`

// Progress reports a lease phase for the device's attempt and renews the
// lease, in one statement (sqlProgress). The first failing check of
// docs/semantics.md wins and nothing is mutated; the epoch never changes.
// Ids that are not canonical uuids name nothing and reach no database.
func (s *Service) Progress(ctx context.Context, now time.Time, deviceID string, p protocol.Progress) (protocol.Reply, error) {
	anyDevice := s.v.progressIgnoresDevice()
	if !protocol.ValidID(p.JobID) || !protocol.ValidID(p.AttemptID) || !protocol.ValidID(deviceID) {
		return progressRows{}.reply(deviceID, p, anyDevice), nil // no rows: identity_mismatch
	}
	q := sqlProgress
	if anyDevice {
		q = strings.Replace(q, "x.device_id = $3", "$3::uuid IS NOT NULL", 1)
	}
	var rows progressRows
	ctx = dbstat.WithOp(ctx, OpProgress)
	err := s.retrying(ctx, OpProgress, func() error {
		return rows.scan(s.pool.QueryRow(ctx, q, p.JobID, p.AttemptID, deviceID, p.LeaseEpoch, string(p.Phase), store.NowArg(now),
			s.cfg.LeaseTTL.Microseconds(), string(protocol.ActorDevice)))
	})
	if err != nil {
		return protocol.Reply{}, err
	}
	r := rows.reply(deviceID, p, anyDevice)
	switch ok := r.Code == protocol.CodeProgressOK; {
	case ok && rows.renewed == nil:
		return protocol.Reply{}, internalf("progress of attempt %s: the checks passed but the fenced write matched no row", p.AttemptID)
	case !ok && rows.renewed != nil:
		return protocol.Reply{}, internalf("progress of attempt %s: the write renewed the lease but the checks answered %s %s",
			p.AttemptID, r.Code, r.Reason)
	case ok:
		if p.Phase != *rows.status {
			if err := protocol.AssertAttemptTransition(*rows.status, p.Phase); err != nil {
				return protocol.Reply{}, internalf("attempt %s: %v", p.AttemptID, err)
			}
		}
		r.JobID, r.AttemptID, r.LeaseExpiresAt = p.JobID, p.AttemptID, rows.renewed.UTC()
	}
	return r, nil
}

// progressRows is what sqlProgress returns: the statement's instant, the
// job and attempt as locked (nil: no such row) and the lease's new expiry
// (nil: nothing was written).
type progressRows struct {
	now                time.Time
	jobStatus          *protocol.JobStatus
	attemptID, device  *string
	status             *protocol.AttemptStatus
	epoch              *int
	expiresAt, renewed *time.Time
}

func (r *progressRows) scan(row pgx.Row) error {
	return row.Scan(&r.now, &r.jobStatus, &r.attemptID, &r.device, &r.status, &r.epoch, &r.expiresAt, &r.renewed)
}

// reply decides the progress from the rows as locked, in the order of
// docs/semantics.md; anyDevice skips the device check (a broken variant
// of the harness, constant false in the default build).
func (r progressRows) reply(deviceID string, p protocol.Progress, anyDevice bool) protocol.Reply {
	conflict := func(reason protocol.ConflictReason) protocol.Reply {
		return protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: reason}
	}
	switch {
	case r.jobStatus == nil || r.attemptID == nil || (*r.device != deviceID && !anyDevice) || *r.epoch != p.LeaseEpoch:
		return conflict(protocol.ReasonIdentityMismatch)
	case !r.status.LeasePhase():
		return conflict(protocol.ReasonAttemptTerminal)
	case *r.jobStatus == protocol.JobCancelling:
		return conflict(protocol.ReasonJobCancelling)
	case !r.now.Before(*r.expiresAt):
		return conflict(protocol.ReasonLeaseExpired)
	case protocol.PhaseRank(p.Phase) < protocol.PhaseRank(*r.status):
		return conflict(protocol.ReasonPhaseRegression)
	}
	return protocol.Reply{Code: protocol.CodeProgressOK}
}
