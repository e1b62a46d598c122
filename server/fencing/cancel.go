package fencing

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/faultpoint"
	"github.com/rendermac/rendermac/server/store"
)

// CancelChannel is the Postgres NOTIFY channel on which Cancel announces
// that a live attempt lost its authority. The notification is sent by the
// deciding transaction, so Postgres delivers it only once the cancel has
// committed; whichever gateway holds the device's session sends it cancel.
const CancelChannel = "rendermac_cancel"

// JobsChannel is the Postgres NOTIFY channel on which a job becoming
// leasable (created, or requeued by Fail or Sweep) is announced, from inside
// the deciding transaction, so it is delivered only once that commits. The
// payload is the job's service.
const JobsChannel = "rendermac_jobs"

// LostChannel is the Postgres NOTIFY channel on which the sweeper
// announces an attempt it ended as lost (payload: a CancelNotice naming the
// attempt and its device), from inside the deciding transaction. The
// gateway holding the device's session tells the device (lease_conflict
// attempt_lost) and counts the slot free again: the device's occupied slots
// are its live attempts (invariant 9), and the lost one is not live.
const LostChannel = "rendermac_lost"

// notifyLost queues the lost notice of a, delivered at COMMIT.
func (st *step) notifyLost(ctx context.Context, a attemptRow) error {
	payload, err := json.Marshal(CancelNotice{JobID: a.JobID, AttemptID: a.ID, DeviceID: a.DeviceID})
	if err != nil {
		return fmt.Errorf("encode lost notice: %w", err)
	}
	return st.write(ctx, "notify lost attempt "+a.ID, false, store.SQLNotify, LostChannel, string(payload))
}

// notifyJobs announces a queued job of service; in a pipelined step it is
// queued with the step's writes (a NOTIFY is delivered at COMMIT either way).
func (st *step) notifyJobs(ctx context.Context, service string) error {
	return st.write(ctx, "notify jobs ("+service+")", false, store.SQLNotify, JobsChannel, service)
}

// CancelNotice is the JSON payload of a CancelChannel notification.
type CancelNotice struct {
	JobID     string `json:"job_id"`
	AttemptID string `json:"attempt_id"`
	DeviceID  string `json:"device_id"`
}

const (
	// Locked after the job, as everywhere.
	sqlLockLiveAttempt = `
SELECT id::text, device_id::text FROM job_attempts
WHERE job_id = $1 AND ` + store.SQLUnended + ` AND status IN ` + store.SQLLiveStatuses + `
FOR UPDATE`
)

// Cancel is a buyer's cancel. A queued job is cancelled at once; an active
// or verifying job becomes cancelling, which takes the live attempt's
// authority away (the attempt row itself is left as it is); cancelling is
// idempotent; a terminal job is job_terminal. Another buyer's job is
// not_found, exactly like a missing one. Its round trips: BEGIN with the
// job's lock and its live attempt's; the writes and the cancel notice with
// COMMIT.
func (s *Service) Cancel(ctx context.Context, now time.Time, buyerID, jobID string) (protocol.Reply, error) {
	s.cfg.FaultPoints.Hit(ctx, faultpoint.CancelBeforeTx)
	var r protocol.Reply
	var l cancelLock
	err := s.pipelined(ctx, OpCancel, now, protocol.ActorBuyer, func(b *pgx.Batch) { l.queue(b, jobID) },
		func(ctx context.Context, st *step) error {
			var err error
			r, err = s.cancel(ctx, st, buyerID, &l)
			return err
		})
	s.cfg.FaultPoints.Hit(ctx, faultpoint.CancelAfterTx)
	return r, err
}

// CancelByOperator is an operator's cancel of any buyer's job, from the
// console: the same two-phase cancel as Cancel (a queued job cancelled at
// once, an active or verifying one cancelling and its device told), its
// journal rows by the actor operator naming operatorID. A job that does not
// exist is not_found.
func (s *Service) CancelByOperator(ctx context.Context, now time.Time, operatorID, jobID string) (protocol.Reply, error) {
	if !protocol.ValidID(operatorID) {
		return protocol.Reply{}, fmt.Errorf("cancel job %s: operator id %q is not a uuid", jobID, operatorID)
	}
	var r protocol.Reply
	var l cancelLock
	err := s.pipelined(ctx, OpCancel, now, protocol.ActorOperator, func(b *pgx.Batch) { l.queue(b, jobID) },
		func(ctx context.Context, st *step) error {
			st.operatorID = operatorID
			j, ok := l.job.lockedJob()
			owner := ""
			if ok {
				owner = j.BuyerID
			}
			var err error
			r, err = s.cancel(ctx, st, owner, &l)
			return err
		})
	return r, err
}

// cancelLock is what Cancel locks, in the order of doc.go: the job, then
// its live attempt, if any (found: the notice's attempt and device).
type cancelLock struct {
	job   jobAttemptLock // the job's lock alone
	found bool
	live  CancelNotice
}

func (l *cancelLock) queue(b *pgx.Batch, jobID string) {
	*l = cancelLock{}
	l.job.queue(b, jobID, "")
	if !protocol.ValidID(jobID) {
		return // names no job, and never reaches Postgres
	}
	l.live.JobID = jobID
	b.Queue(sqlLockLiveAttempt, jobID).QueryRow(optionalRow(&l.found, "find live attempt of "+jobID, &l.live.AttemptID, &l.live.DeviceID))
}

func (s *Service) cancel(ctx context.Context, st *step, buyerID string, l *cancelLock) (protocol.Reply, error) {
	j, jobOK := l.job.lockedJob()
	switch {
	case !jobOK || j.BuyerID != buyerID:
		return protocol.Reply{Code: protocol.CodeNotFound}, nil
	case j.Status == protocol.JobQueued && s.v.cancelQueuedNoop():
		return protocol.Reply{Code: protocol.CodeCancelled}, nil
	case j.Status == protocol.JobQueued:
		return protocol.Reply{Code: protocol.CodeCancelled}, st.moveJob(ctx, &j, protocol.JobCancelled, "")
	case j.Status == protocol.JobActive || j.Status == protocol.JobVerifying:
		if err := st.moveJob(ctx, &j, protocol.JobCancelling, ""); err != nil {
			return protocol.Reply{}, err
		}
		return protocol.Reply{Code: protocol.CodeCancelling}, st.notifyCancel(ctx, l)
	case j.Status == protocol.JobCancelling:
		return protocol.Reply{Code: protocol.CodeCancelling}, nil
	case j.Status.Terminal():
		return protocol.Reply{Code: protocol.CodeJobTerminal}, nil
	}
	return protocol.Reply{}, internalf("job %s has unknown status %q", j.ID, j.Status)
}

// notifyCancel tells the gateways which device lost which attempt.
func (st *step) notifyCancel(ctx context.Context, l *cancelLock) error {
	if !l.found {
		return internalf("cancelling job %s has no live attempt", l.live.JobID)
	}
	payload, err := json.Marshal(l.live)
	if err != nil {
		return fmt.Errorf("cancel notice: %w", err)
	}
	return st.write(ctx, "notify cancel of "+l.live.JobID, false, store.SQLNotify, CancelChannel, string(payload))
}
