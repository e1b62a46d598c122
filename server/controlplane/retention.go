package controlplane

import (
	"context"
	"log/slog"
	"time"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/server/fencing"
)

// DefaultPruneEvery is how often the server's retention runs a prune when
// RetainFinished is set and PruneEvery is not.
const DefaultPruneEvery = 10 * time.Minute

// retention is the server's --retain-finished loop: a prune of the jobs
// finished more than retain ago, at start and then every interval of the
// injected clock. Each prune works in the service's short batches, so it
// runs beside leases and commits; a failed prune is logged and tried again
// at the next interval (its queued objects with it).
type retention struct {
	retain, every time.Duration
	clk           clock.Clock
	log           *slog.Logger
	// now is the instant a pass prunes against (the database clock unless
	// clk is pinned); prune is fencing.Service.PruneFinished.
	now   func(ctx context.Context) (time.Time, error)
	prune func(ctx context.Context, olderThan time.Time, batch int) (fencing.PruneStats, error)
}

// run prunes until ctx ends.
func (r retention) run(ctx context.Context) {
	for {
		r.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-r.clk.After(r.every):
		}
	}
}

// pass is one prune: of the jobs finished before now - retain.
func (r retention) pass(ctx context.Context) {
	now, err := r.now(ctx)
	if err != nil {
		r.log.Warn("retention: read the clock", "err", err)
		return
	}
	bound := now.Add(-r.retain)
	st, err := r.prune(ctx, bound, fencing.DefaultPruneBatch)
	if err != nil && ctx.Err() == nil {
		r.log.Warn("retention: prune", "older_than", bound, "err", err, "jobs", st.Jobs, "objects", st.Objects)
		return
	}
	if st.Jobs > 0 || st.Objects > 0 {
		r.log.Info("retention: pruned finished jobs", "older_than", bound, "jobs", st.Jobs, "attempts", st.Attempts,
			"journal_rows", st.Events, "webhooks", st.Webhooks, "objects", st.Objects, "batches", st.Batches)
	}
}
