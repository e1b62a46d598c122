package fencing

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/faultpoint"
	"github.com/rendermac/rendermac/server/store"
)

const (
	// The device row is the first lock Lease takes; see doc.go.
	sqlLockDevice = `SELECT services, slots_total, status FROM devices WHERE id = $1 FOR UPDATE`

	sqlCountLive = `
SELECT count(*) FROM job_attempts
WHERE device_id = $1 AND status IN ` + store.SQLLiveStatuses + ` AND ` + store.SQLUnended

	// The matcher: the oldest eligible queued job, skipping jobs other
	// transactions hold, so concurrent leases never wait on each other.
	// It returns what the offer carries, so no read follows the lease. The
	// ORDER BY names jobs.id: a bare id would be the output column id::text,
	// and sorting by that text (the same order) cannot use jobs_queued_idx,
	// so every pick sorted its candidates (uuid_out per row scanned).
	// A paused service's jobs are not offered (SPEC, "Pausing a service"):
	// the device's services less the paused ones are computed once, an
	// InitPlan, so the scan of jobs_queued_idx is the plan it was.
	sqlPickJob = `
SELECT id::text, attempt_count, service, params, input_bytes, input_sha256 FROM jobs
WHERE status = 'queued' AND admission_deadline > $2
  AND service = ANY(ARRAY(SELECT unnest($1::text[]) EXCEPT SELECT service FROM paused_services))
ORDER BY jobs.created_at, jobs.id
LIMIT 1 FOR UPDATE SKIP LOCKED`

	sqlInsertAttempt = `
INSERT INTO job_attempts (id, job_id, attempt_number, device_id, status, lease_epoch, commit_token_hash,
                          lease_expires_at, created_at)
VALUES ($1, $2, $3, $4, 'leased', 1, $5, $6, $7)`

	sqlActivateJob = `
UPDATE jobs SET status = 'active', attempt_count = attempt_count + 1, updated_at = $3
WHERE id = $1 AND status = 'queued' AND attempt_count = $2`
)

// OfferJob is what a lease offer carries of the leased job besides the
// reply: its service, params and input. Searched is the device's services
// as the pick searched them, with lease_offer and with no_job: a no_job
// says no job of these was leasable.
type OfferJob struct {
	Service     string
	Params      map[string]string
	InputBytes  int64
	InputSHA256 string
	Searched    []string
}

// Lease offers the device the oldest queued job it can run, in one
// transaction: not_found for an unknown or revoked device, no_slot when its
// live attempts fill its slots, no_job when nothing fits, else lease_offer
// with the plaintext commit token (returned here once and stored only as its
// hash). An attempt id and a token are drawn only when an attempt is inserted.
// A unique violation of the one-live-attempt index is returned as an error:
// it would mean the locks failed, and hiding it would hide that.
func (s *Service) Lease(ctx context.Context, now time.Time, deviceID string) (protocol.Reply, error) {
	r, _, err := s.LeaseJob(ctx, now, deviceID)
	return r, err
}

// LeaseJob is Lease, also returning, with lease_offer, the leased job's
// offer fields, read by the same statement that picks the job. Its round
// trips: BEGIN with the device lock and the count of its live attempts;
// the heartbeat with the pick; the attempt's inserts with COMMIT (a no_job
// or no_slot commits alone).
func (s *Service) LeaseJob(ctx context.Context, now time.Time, deviceID string) (protocol.Reply, OfferJob, error) {
	d := draws{ids: s.ids}
	var r protocol.Reply
	var job OfferJob
	var dev leaseDevice
	err := s.pipelined(ctx, OpLease, now, protocol.ActorMatcher, func(b *pgx.Batch) { dev.queue(b, deviceID) },
		func(ctx context.Context, st *step) error {
			var err error
			r, job, err = s.lease(ctx, st, deviceID, &dev, &d)
			return err
		})
	return r, job, err
}

// leaseDevice is the device row Lease locks first and its live attempts,
// counted after the lock is held (the next statement of the pipeline, so
// under a snapshot taken after the lock).
type leaseDevice struct {
	found    bool
	services []string
	slots    int
	status   protocol.DeviceStatus
	live     int
}

func (dv *leaseDevice) queue(b *pgx.Batch, deviceID string) {
	*dv = leaseDevice{}
	if !protocol.ValidID(deviceID) {
		return
	}
	b.Queue(sqlLockDevice, deviceID).QueryRow(optionalRow(&dv.found, "lock device "+deviceID, &dv.services, &dv.slots, &dv.status))
	b.Queue(sqlCountLive, deviceID).QueryRow(func(r pgx.Row) error {
		if err := r.Scan(&dv.live); err != nil {
			return fmt.Errorf("count live attempts of %s: %w", deviceID, err)
		}
		return nil
	})
}

func (s *Service) lease(ctx context.Context, st *step, deviceID string, dev *leaseDevice, d *draws) (protocol.Reply, OfferJob, error) {
	if !dev.found || dev.status == protocol.DeviceRevoked {
		return protocol.Reply{Code: protocol.CodeNotFound}, OfferJob{}, nil
	}
	live, slots := dev.live, dev.slots
	if live >= slots {
		return protocol.Reply{Code: protocol.CodeNoSlot}, OfferJob{}, nil
	}
	s.cfg.FaultPoints.Hit(ctx, faultpoint.LeaseBeforePick) // the device's row lock is held
	if err := st.heartbeat(ctx, deviceID); err != nil {
		return protocol.Reply{}, OfferJob{}, err
	}
	var jobID string
	var count int
	job := OfferJob{Searched: dev.services}
	found := false
	admittedAfter := st.now
	if s.v.ignoreAdmissionDeadline() {
		admittedAfter = time.Time{} // every deadline is after year 1
	}
	st.pipe.Queue(sqlPickJob, dev.services, admittedAfter).QueryRow(
		optionalRow(&found, "pick job", &jobID, &count, &job.Service, &job.Params, &job.InputBytes, &job.InputSHA256))
	if err := st.flush(ctx); err != nil {
		return protocol.Reply{}, OfferJob{}, err
	}
	if !found {
		return protocol.Reply{Code: protocol.CodeNoJob}, job, nil // nothing was scanned into it
	}
	s.cfg.FaultPoints.Hit(ctx, faultpoint.LeaseAfterPick) // the job's row lock is held too
	if job.Params == nil {
		job.Params = map[string]string{}
	}
	r, err := s.insertAttempt(ctx, st, jobID, count, deviceID, d)
	return r, job, err
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
	if err := st.write(ctx, fmt.Sprintf("insert attempt %d of job %s", number, jobID), false, sqlInsertAttempt,
		attemptID, jobID, number, deviceID, hash, expires, st.now); err != nil {
		return protocol.Reply{}, err
	}
	if err := st.journal(ctx, jobID, attemptID, "", string(protocol.AttemptLeased), ""); err != nil {
		return protocol.Reply{}, err
	}
	if err := st.write(ctx, "activate job "+jobID, true, sqlActivateJob, jobID, count, st.now); err != nil {
		return protocol.Reply{}, err
	}
	if err := st.journal(ctx, jobID, "", string(protocol.JobQueued), string(protocol.JobActive), ""); err != nil {
		return protocol.Reply{}, err
	}
	return protocol.Reply{Code: protocol.CodeLeaseOffer, JobID: jobID, AttemptID: attemptID, AttemptNumber: number,
		LeaseEpoch: 1, CommitToken: token, LeaseExpiresAt: expires}, nil
}
