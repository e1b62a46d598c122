package api

import (
	"context"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// createJobWithInput creates the job and stores its input (beforeCommit) in
// the creating transaction, so no device can lease a job whose input is not
// stored yet, and a failed store writes nothing.
func (a *API) createJobWithInput(ctx context.Context, now time.Time, req protocol.CreateJobRequest,
	beforeCommit func(ctx context.Context, jobID string) error) (protocol.Reply, error) {
	return a.svc.CreateJobWithInput(ctx, now, req, beforeCommit)
}
