package fencing

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
)

// sqlCountWithdrawn counts a withdrawn offer on its locked job, so that it
// spends none of the job's max_attempts (jobs.withdrawn_count).
const sqlCountWithdrawn = `
UPDATE jobs SET withdrawn_count = withdrawn_count + 1 WHERE id = $1 AND status = $2`

// Withdraw takes back an offer the gateway leased for deviceID but could
// not deliver (its session closed before the write, or the offer could not
// be built), so that the job goes back to the queue at once and the
// undelivered attempt spends none of its budget (SPEC section 3,
// Withdraw). It is fenced as a fail is, by device, job, attempt, epoch and
// commit token, and only an attempt still leased is withdrawn: a device
// that acted on the offer had it. A refusal is withdraw_conflict and
// mutates nothing. The device is not heartbeated: it said nothing.
//
// Its round trips are Fail's: BEGIN with the job's and then the attempt's
// lock; the writes with COMMIT.
func (s *Service) Withdraw(ctx context.Context, now time.Time, deviceID string, w protocol.Withdrawal) (protocol.Reply, error) {
	var r protocol.Reply
	var l jobAttemptLock
	err := s.pipelined(ctx, OpWithdraw, now, protocol.ActorMatcher, func(b *pgx.Batch) { l.queue(b, w.JobID, w.AttemptID) },
		func(ctx context.Context, st *step) error {
			var err error
			r, err = s.withdraw(ctx, st, deviceID, w, &l)
			return err
		})
	return r, err
}

// withdraw decides a Withdraw over the job and attempt l locked.
func (s *Service) withdraw(ctx context.Context, st *step, deviceID string, w protocol.Withdrawal, l *jobAttemptLock) (protocol.Reply, error) {
	j, a, ok := l.result()
	fc, ok := s.authorize(ok, a, deviceID, w.LeaseEpoch, w.CommitToken, false)
	if !ok || a.Status != protocol.AttemptLeased {
		return protocol.Reply{Code: protocol.CodeWithdrawConflict}, nil
	}
	if err := st.endAttempt(ctx, &a, fc, protocol.AttemptFailed, protocol.FailOfferWithdrawn); err != nil {
		return protocol.Reply{}, err
	}
	if err := st.write(ctx, "count withdrawn offer of job "+j.ID, true, sqlCountWithdrawn, j.ID, string(j.Status)); err != nil {
		return protocol.Reply{}, err
	}
	j.WithdrawnCount++
	switch {
	case j.Status == protocol.JobCancelling:
		return protocol.Reply{Code: protocol.CodeWithdrawn}, st.moveJob(ctx, &j, protocol.JobCancelled, "")
	case st.now.Before(j.AdmissionDeadline):
		if err := st.moveJob(ctx, &j, protocol.JobQueued, ""); err != nil {
			return protocol.Reply{}, err
		}
		return protocol.Reply{Code: protocol.CodeWithdrawn, Requeued: true}, st.notifyJobs(ctx, j.Service)
	default:
		return protocol.Reply{Code: protocol.CodeWithdrawn}, st.moveJob(ctx, &j, protocol.JobFailed, protocol.FailAdmissionExpired)
	}
}
