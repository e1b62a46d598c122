package fencing

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/faultpoint"
)

// Fail gives the device's attempt up with a failure code. The control plane,
// not the agent, decides what happens to the job: cancelled if it was
// cancelling, requeued if the code is retryable and budget and deadline
// allow, failed otherwise. An expired but not yet swept lease may still
// fail: the agent is giving its authority up, not using it.
func (s *Service) Fail(ctx context.Context, now time.Time, deviceID string, f protocol.Fail) (protocol.Reply, error) {
	if !f.FailureCode.Valid() {
		return protocol.Reply{Code: protocol.CodeBadFailureCode}, nil
	}
	s.cfg.FaultPoints.Hit(ctx, faultpoint.FailBeforeTx)
	var r protocol.Reply
	var l jobAttemptLock
	err := s.pipelined(ctx, OpFail, now, protocol.ActorDevice, func(b *pgx.Batch) { l.queue(b, f.JobID, f.AttemptID) },
		func(ctx context.Context, st *step) error {
			var err error
			r, err = s.fail(ctx, st, deviceID, f, &l)
			return err
		})
	s.cfg.FaultPoints.Hit(ctx, faultpoint.FailAfterTx)
	return r, err
}

// fail decides a Fail over the job and attempt l locked. Its round trips:
// BEGIN with both locks; the writes with COMMIT.
func (s *Service) fail(ctx context.Context, st *step, deviceID string, f protocol.Fail, l *jobAttemptLock) (protocol.Reply, error) {
	j, a, ok := l.result()
	fc, ok := s.authorize(ok, a, deviceID, f.LeaseEpoch, f.CommitToken, false)
	if !ok || !a.Status.LeasePhase() {
		return protocol.Reply{Code: protocol.CodeFailConflict}, nil
	}
	if err := st.heartbeat(ctx, deviceID); err != nil { // accepted; a refusal heartbeats nothing
		return protocol.Reply{}, err
	}
	if err := st.endAttempt(ctx, &a, fc, protocol.AttemptFailed, f.FailureCode); err != nil {
		return protocol.Reply{}, err
	}
	requeued, err := st.afterAttemptEnded(ctx, &j, f.FailureCode, s.v)
	if err != nil {
		return protocol.Reply{}, err
	}
	return protocol.Reply{Code: protocol.CodeFailOK, Requeued: requeued}, nil
}
