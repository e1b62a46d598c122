package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/faultpoint"
)

const (
	// The device row is the first lock Lease takes; see doc.go.
	sqlLockDevice = `SELECT services, slots_total, status FROM devices WHERE id = $1 FOR UPDATE`

	sqlCountLive = `
SELECT count(*) FROM job_attempts
WHERE device_id = $1 AND status IN ('leased', 'downloading', 'running', 'uploading', 'committing')`

	// Revoked stays revoked: a heartbeat never resurrects a device.
	sqlTouchDevice = `
UPDATE devices SET last_seen_at = $2, status = 'online' WHERE id = $1 AND status <> 'revoked'`

	// The matcher: the oldest eligible queued job, skipping jobs other
	// transactions hold, so concurrent leases never wait on each other.
	sqlPickJob = `
SELECT id::text, attempt_count FROM jobs
WHERE status = 'queued' AND service = ANY($1::text[]) AND admission_deadline > $2
ORDER BY created_at, id
LIMIT 1 FOR UPDATE SKIP LOCKED`

	sqlInsertAttempt = `
INSERT INTO job_attempts (id, job_id, attempt_number, device_id, status, lease_epoch, commit_token_hash,
                          lease_expires_at, created_at)
VALUES ($1, $2, $3, $4, 'leased', 1, $5, $6, $7)`

	sqlActivateJob = `
UPDATE jobs SET status = 'active', attempt_count = attempt_count + 1, updated_at = $3
WHERE id = $1 AND status = 'queued' AND attempt_count = $2`
)

// Lease offers the device the oldest queued job it can run, in one
// transaction: not_found for an unknown or revoked device, no_slot when its
// live attempts fill its slots, no_job when nothing fits, else lease_offer
// with the plaintext commit token (returned here once and stored only as its
// hash). An attempt id and a token are drawn only when an attempt is inserted.
// A unique violation of the one-live-attempt index is returned as an error:
// it would mean the locks failed, and hiding it would hide that.
func (s *Service) Lease(ctx context.Context, now time.Time, deviceID string) (protocol.Reply, error) {
	d := draws{ids: s.ids}
	var r protocol.Reply
	err := s.inTx(ctx, OpLease, func(tx pgx.Tx) error {
		st := &step{tx: tx, actor: protocol.ActorMatcher}
		var err error
		if st.now, err = resolveNow(ctx, tx, now); err != nil {
			return err
		}
		r, err = s.lease(ctx, st, deviceID, &d)
		return err
	})
	return r, err
}

func (s *Service) lease(ctx context.Context, st *step, deviceID string, d *draws) (protocol.Reply, error) {
	var services []string
	var slots int
	var status protocol.DeviceStatus
	err := pgx.ErrNoRows
	if protocol.ValidID(deviceID) {
		err = st.tx.QueryRow(ctx, sqlLockDevice, deviceID).Scan(&services, &slots, &status)
	}
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && status == protocol.DeviceRevoked) {
		return protocol.Reply{Code: protocol.CodeNotFound}, nil
	}
	if err != nil {
		return protocol.Reply{}, fmt.Errorf("lock device %s: %w", deviceID, err)
	}
	var live int
	if err := st.tx.QueryRow(ctx, sqlCountLive, deviceID).Scan(&live); err != nil {
		return protocol.Reply{}, fmt.Errorf("count live attempts of %s: %w", deviceID, err)
	}
	if live >= slots {
		return protocol.Reply{Code: protocol.CodeNoSlot}, nil
	}
	faultpoint.Hit(ctx, faultpoint.LeaseBeforePick) // the device's row lock is held
	if _, err := st.tx.Exec(ctx, sqlTouchDevice, deviceID, st.now); err != nil {
		return protocol.Reply{}, fmt.Errorf("touch device %s: %w", deviceID, err)
	}
	var jobID string
	var count int
	admittedAfter := st.now
	if s.v.ignoreAdmissionDeadline() {
		admittedAfter = time.Time{} // every deadline is after year 1
	}
	err = st.tx.QueryRow(ctx, sqlPickJob, services, admittedAfter).Scan(&jobID, &count)
	if errors.Is(err, pgx.ErrNoRows) {
		return protocol.Reply{Code: protocol.CodeNoJob}, nil
	}
	if err != nil {
		return protocol.Reply{}, fmt.Errorf("pick job: %w", err)
	}
	return s.insertAttempt(ctx, st, jobID, count, deviceID, d)
}

// insertAttempt starts attempt count+1 of the locked queued job on the device.
func (s *Service) insertAttempt(ctx context.Context, st *step, jobID string, count int, deviceID string, d *draws) (protocol.Reply, error) {
	if err := protocol.AssertJobTransition(protocol.JobQueued, protocol.JobActive); err != nil {
		return protocol.Reply{}, internalf("job %s: %v", jobID, err)
	}
	token, hash, err := d.commitToken()
	if err != nil {
		return protocol.Reply{}, err
	}
	attemptID, number, expires := d.attemptID(), count+1, at(st.now, s.cfg.LeaseTTL)
	if _, err := st.tx.Exec(ctx, sqlInsertAttempt, attemptID, jobID, number, deviceID, hash, expires, st.now); err != nil {
		return protocol.Reply{}, fmt.Errorf("insert attempt %d of job %s: %w", number, jobID, err)
	}
	if err := st.journal(ctx, jobID, attemptID, "", string(protocol.AttemptLeased), ""); err != nil {
		return protocol.Reply{}, err
	}
	tag, err := st.tx.Exec(ctx, sqlActivateJob, jobID, count, st.now)
	if err := wantOne("activate job "+jobID, tag.RowsAffected(), err); err != nil {
		return protocol.Reply{}, err
	}
	if err := st.journal(ctx, jobID, "", string(protocol.JobQueued), string(protocol.JobActive), ""); err != nil {
		return protocol.Reply{}, err
	}
	return protocol.Reply{Code: protocol.CodeLeaseOffer, JobID: jobID, AttemptID: attemptID, AttemptNumber: number,
		LeaseEpoch: 1, CommitToken: token, LeaseExpiresAt: expires}, nil
}
