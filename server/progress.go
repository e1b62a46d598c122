package server

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
)

// sqlRenewLease sets the phase and renews the lease under the full fence;
// with an unchanged phase it only renews.
const sqlRenewLease = `
UPDATE job_attempts SET status = $5, lease_expires_at = $6
WHERE id = $1 AND job_id = $2 AND device_id = $3 AND lease_epoch = $4 AND status = $7`

// Progress reports a lease phase for the device's attempt and renews the
// lease. The first failing check of docs/semantics.md wins and nothing is
// mutated; the epoch never changes.
func (s *Service) Progress(ctx context.Context, now time.Time, deviceID string, p protocol.Progress) (protocol.Reply, error) {
	var r protocol.Reply
	var l jobAttemptLock
	err := s.pipelined(ctx, OpProgress, now, protocol.ActorDevice, func(b *pgx.Batch) { l.queue(b, p.JobID, p.AttemptID) },
		func(ctx context.Context, st *step) error {
			var err error
			r, err = s.progress(ctx, st, deviceID, p, &l)
			return err
		})
	return r, err
}

// progress decides on the job and attempt l locked (in the transaction's
// first round trip); its writes go out together.
func (s *Service) progress(ctx context.Context, st *step, deviceID string, p protocol.Progress, l *jobAttemptLock) (protocol.Reply, error) {
	conflict := func(reason protocol.ConflictReason) (protocol.Reply, error) {
		return protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: reason}, nil
	}
	j, a, ok := l.result()
	switch {
	case !ok || (a.DeviceID != deviceID && !s.v.progressIgnoresDevice()) || a.LeaseEpoch != p.LeaseEpoch:
		return conflict(protocol.ReasonIdentityMismatch)
	case !a.Status.LeasePhase():
		return conflict(protocol.ReasonAttemptTerminal)
	case j.Status == protocol.JobCancelling:
		return conflict(protocol.ReasonJobCancelling)
	case !st.now.Before(a.LeaseExpiresAt):
		return conflict(protocol.ReasonLeaseExpired)
	case protocol.PhaseRank(p.Phase) < protocol.PhaseRank(a.Status):
		return conflict(protocol.ReasonPhaseRegression)
	}
	if p.Phase != a.Status {
		if err := protocol.AssertAttemptTransition(a.Status, p.Phase); err != nil {
			return protocol.Reply{}, internalf("attempt %s: %v", a.ID, err)
		}
	}
	expires := at(st.now, s.cfg.LeaseTTL)
	fenceDevice := deviceID
	if s.v.progressIgnoresDevice() {
		fenceDevice = a.DeviceID
	}
	if err := st.write(ctx, "renew lease of "+a.ID, true, sqlRenewLease, a.ID, a.JobID, fenceDevice, p.LeaseEpoch,
		string(p.Phase), expires, string(a.Status)); err != nil {
		return protocol.Reply{}, err
	}
	if p.Phase != a.Status {
		if err := st.journal(ctx, a.JobID, a.ID, string(a.Status), string(p.Phase), ""); err != nil {
			return protocol.Reply{}, err
		}
	}
	if err := st.heartbeat(ctx, deviceID); err != nil {
		return protocol.Reply{}, err
	}
	return protocol.Reply{Code: protocol.CodeProgressOK, JobID: a.JobID, AttemptID: a.ID, LeaseExpiresAt: expires}, nil
}
