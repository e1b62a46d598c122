package fencing

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
)

// SealedError refuses an upload to an attempt's output key once the attempt
// has left its lease phases: from the claim on (committing, and every
// terminal status) the output is write-once. Status is "" when the job has
// no such attempt.
type SealedError struct {
	AttemptID string
	Status    protocol.AttemptStatus
}

func (e *SealedError) Error() string {
	if e.Status == "" {
		return "no attempt " + e.AttemptID + " of this job: nothing may be uploaded here"
	}
	return "attempt " + e.AttemptID + " is " + string(e.Status) + ": its output is sealed (write-once once claimed by a commit)"
}

// sqlSealCheck locks the attempt row in share mode: a commit's claim (and
// the sweeper ending the attempt) update that row, so they wait while an
// upload is being published, and an upload that takes the lock after them
// sees the attempt's new status.
const sqlSealCheck = `SELECT status FROM job_attempts WHERE id = $1 AND job_id = $2 FOR SHARE`

// PutOutput stores r at the attempt's output key, publishing it only while
// the attempt is in a lease phase (leased, downloading, running,
// uploading), with its row share-locked across the store's rename; the
// body streams before any lock is taken. Once a commit has claimed the
// output (committing) or the attempt ended, it returns a *SealedError and
// the key keeps the bytes verification read, which are the bytes served.
func (s *Service) PutOutput(ctx context.Context, jobID, attemptID string, r io.Reader) (artifact.Object, error) {
	if s.store == nil {
		return artifact.Object{}, errors.New("put output: this service has no artifact store")
	}
	if !protocol.ValidID(jobID) || !protocol.ValidID(attemptID) {
		return artifact.Object{}, &SealedError{AttemptID: attemptID}
	}
	ctx = dbstat.WithOp(ctx, OpUpload)
	return s.store.PutIf(ctx, protocol.OutputKey(jobID, attemptID), r, func(publish func() error) error {
		// BEGIN and the check go out in one round trip; the rollback is the second.
		b := &pgx.Batch{}
		b.BeginTx(pgx.TxOptions{})
		// A missing row is no error of the batch: pgx drops every statement
		// of a batch that failed from its cache, so each upload naming no
		// attempt would have the next one prepared and planned again.
		var status protocol.AttemptStatus
		var found bool
		b.Queue(sqlSealCheck, attemptID, jobID).QueryRow(optionalRow(&found, "seal check", &status))
		tx, err := sendBegun(ctx, s.pool, b)
		if err == nil {
			// Read-only: rolling back releases the share lock after the rename.
			defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		}
		switch {
		case err != nil:
			return fmt.Errorf("check the attempt of an upload: %w", err)
		case !found:
			return &SealedError{AttemptID: attemptID}
		case !status.LeasePhase() && !s.v.noOutputSeal():
			return &SealedError{AttemptID: attemptID, Status: status}
		}
		return publish()
	})
}
