package fencing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/faultpoint"
	"github.com/rendermac/rendermac/server/store"
)

// The sweeper's scans. The attempts' read the live ones through
// job_attempts_live_device_idx (store.SQLUnended; there is no index on
// lease_expires_at, which every renewal would have to update). They only
// pick candidates; each candidate is then
// decided in its own short transaction that locks job then attempt and
// re-checks the condition, so a concurrent commit or fail wins cleanly.
const (
	sqlExpiredLeases = `
SELECT a.job_id::text, a.id::text FROM job_attempts a JOIN jobs j ON j.id = a.job_id
WHERE a.` + store.SQLUnended + ` AND a.status IN ` + store.SQLLeasePhases + ` AND a.lease_expires_at <= $1
ORDER BY j.created_at, j.id`

	sqlAbandonedCommits = `
SELECT a.job_id::text, a.id::text FROM job_attempts a JOIN jobs j ON j.id = a.job_id
WHERE a.` + store.SQLUnended + ` AND a.status = 'committing' AND a.lease_expires_at <= $1
ORDER BY j.created_at, j.id`

	sqlExpiredAdmissions = `
SELECT id::text FROM jobs WHERE status = 'queued' AND admission_deadline <= $1 ORDER BY jobs.created_at, jobs.id`

	// Devices are locked in id order so that concurrent sweepers cannot deadlock.
	sqlSilentDevices = `
UPDATE devices SET status = 'offline'
WHERE id IN (SELECT id FROM devices WHERE status = 'online' AND last_seen_at <= $1 ORDER BY id FOR UPDATE)`
)

// Sweep applies time: expired leases are lost (and their jobs requeued,
// cancelled or failed), abandoned commits are verified again and finished,
// queued jobs past their deadline fail, silent devices go offline, in that
// order. A zero now is read once from the database clock, so one sweep sees
// one instant. Store I/O trouble while re-verifying leaves that attempt
// committing for the next sweep; the sweep goes on and returns its result
// together with the joined errors.
func (s *Service) Sweep(ctx context.Context, now time.Time) (protocol.SweepResult, error) {
	var res protocol.SweepResult
	// Everything a sweep sends is its work, its candidate scans too, for
	// the pool tracer's per-operation counts (rendermac bench).
	ctx = dbstat.WithOp(ctx, OpSweep)
	now, err := store.ResolveNow(ctx, s.pool, now)
	if err != nil {
		return res, fmt.Errorf("%s: %w", OpSweep, err)
	}
	if err := s.sweepLeases(ctx, now, &res); err != nil {
		return res, err
	}
	verifyErr, err := s.sweepCommits(ctx, now, &res)
	if err != nil {
		return res, errors.Join(verifyErr, err)
	}
	if err := s.sweepAdmissions(ctx, now, &res); err != nil {
		return res, errors.Join(verifyErr, err)
	}
	s.cfg.FaultPoints.Hit(ctx, faultpoint.SweepBeforeTx)
	// One statement, so its own transaction: one round trip.
	err = s.retrying(ctx, OpSweep, func() error {
		tag, err := s.pool.Exec(ctx, sqlSilentDevices, at(now, -s.cfg.HeartbeatWindow))
		res.Offline = int(tag.RowsAffected())
		return err
	})
	s.cfg.FaultPoints.Hit(ctx, faultpoint.SweepAfterTx)
	if err != nil {
		return res, errors.Join(verifyErr, fmt.Errorf("offline devices: %w", err))
	}
	return res, verifyErr
}

// pair is a (job, attempt) candidate of a scan.
type pair struct{ jobID, attemptID string }

func (s *Service) sweepLeases(ctx context.Context, now time.Time, res *protocol.SweepResult) error {
	pairs, err := s.scanPairs(ctx, sqlExpiredLeases, now)
	if err != nil {
		return err
	}
	for _, p := range pairs {
		var lost, requeued bool
		var job protocol.JobStatus
		var l jobAttemptLock
		s.cfg.FaultPoints.Hit(ctx, faultpoint.SweepBeforeTx)
		err := s.pipelined(ctx, OpSweep, now, protocol.ActorSweeper, func(b *pgx.Batch) { l.queue(b, p.jobID, p.attemptID) },
			func(ctx context.Context, st *step) error {
				var err error
				lost, requeued, job, err = loseAttempt(ctx, st, &l)
				return err
			})
		s.cfg.FaultPoints.Hit(ctx, faultpoint.SweepAfterTx)
		if err != nil {
			return err
		}
		if lost {
			res.Lost++
			if requeued {
				res.Requeued++
			}
			countTerminal(res, job)
		}
	}
	return nil
}

// loseAttempt is sweep step 1 for one attempt, re-checked under the locks
// l took: lost is false when someone else decided the attempt meanwhile.
// job is the job's status afterwards. Its round trips: BEGIN with the
// locks; the writes with COMMIT.
func loseAttempt(ctx context.Context, st *step, l *jobAttemptLock) (lost, requeued bool, job protocol.JobStatus, err error) {
	j, a, ok := l.result()
	if !ok || !a.Status.LeasePhase() || st.now.Before(a.LeaseExpiresAt) {
		return false, false, "", nil
	}
	if err := st.endAttempt(ctx, &a, rowFence(a), protocol.AttemptLost, protocol.FailLeaseExpired); err != nil {
		return false, false, "", err
	}
	if err := st.notifyLost(ctx, a); err != nil {
		return false, false, "", err
	}
	requeued, err = st.afterAttemptEnded(ctx, &j, protocol.FailLeaseExpired, variant{})
	return err == nil, requeued, j.Status, err
}

// countTerminal counts a job terminal transition in the sweep's result.
func countTerminal(res *protocol.SweepResult, job protocol.JobStatus) {
	switch job {
	case protocol.JobSucceeded:
		res.Succeeded++
	case protocol.JobFailed:
		res.Failed++
	case protocol.JobCancelled:
		res.Cancelled++
	}
}

// sweepCommits is step 2: verification outside any transaction, then
// transaction 2 with the sweeper as actor. It returns verification I/O
// errors separately from errors that stop the sweep.
func (s *Service) sweepCommits(ctx context.Context, now time.Time, res *protocol.SweepResult) (verifyErr, err error) {
	pairs, err := s.scanPairs(ctx, sqlAbandonedCommits, now)
	if err != nil {
		return nil, err
	}
	var verifyErrs []error
	for _, p := range pairs {
		v, err := s.VerifyVerdict(ctx, p.jobID, p.attemptID)
		if err != nil {
			verifyErrs = append(verifyErrs, err)
			continue
		}
		s.cfg.FaultPoints.Hit(ctx, faultpoint.SweepBeforeTx)
		ok := v.OK
		r, err := s.commitFinish(ctx, now, p.jobID, p.attemptID, ok, protocol.ActorSweeper, v)
		s.cfg.FaultPoints.Hit(ctx, faultpoint.SweepAfterTx)
		if err != nil {
			return errors.Join(verifyErrs...), err
		}
		// attempt_not_committable: another verifier finished it meanwhile.
		if r.Code != protocol.CodeAttemptNotCommittable {
			res.Reverified++
			countTerminal(res, terminalOf[r.Code])
		}
	}
	return errors.Join(verifyErrs...), nil
}

// terminalOf is the job status transaction 2's deciding replies leave.
var terminalOf = map[protocol.Code]protocol.JobStatus{
	protocol.CodeCommitOK:           protocol.JobSucceeded,
	protocol.CodeVerificationFailed: protocol.JobFailed,
	protocol.CodeJobCancelled:       protocol.JobCancelled,
}

func (s *Service) sweepAdmissions(ctx context.Context, now time.Time, res *protocol.SweepResult) error {
	ids, err := s.scanIDs(ctx, sqlExpiredAdmissions, now)
	if err != nil {
		return err
	}
	for _, id := range ids {
		var expired bool
		var l jobAttemptLock // the job's lock alone: no attempt id
		s.cfg.FaultPoints.Hit(ctx, faultpoint.SweepBeforeTx)
		err := s.pipelined(ctx, OpSweep, now, protocol.ActorSweeper, func(b *pgx.Batch) { l.queue(b, id, "") },
			func(ctx context.Context, st *step) error {
				j, ok := l.lockedJob()
				expired = ok && j.Status == protocol.JobQueued && !st.now.Before(j.AdmissionDeadline)
				if !expired {
					return nil
				}
				return st.moveJob(ctx, &j, protocol.JobFailed, protocol.FailAdmissionExpired)
			})
		s.cfg.FaultPoints.Hit(ctx, faultpoint.SweepAfterTx)
		if err != nil {
			return err
		}
		if expired {
			res.AdmissionExpired++
			res.Failed++
		}
	}
	return nil
}

func (s *Service) scanPairs(ctx context.Context, query string, now time.Time) ([]pair, error) {
	rows, err := s.pool.Query(ctx, query, now)
	if err != nil {
		return nil, fmt.Errorf("%s: scan: %w", OpSweep, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pair, error) {
		var p pair
		return p, r.Scan(&p.jobID, &p.attemptID)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: scan: %w", OpSweep, err)
	}
	return out, nil
}

func (s *Service) scanIDs(ctx context.Context, query string, now time.Time) ([]string, error) {
	rows, err := s.pool.Query(ctx, query, now)
	if err != nil {
		return nil, fmt.Errorf("%s: scan: %w", OpSweep, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("%s: scan: %w", OpSweep, err)
	}
	return out, nil
}
