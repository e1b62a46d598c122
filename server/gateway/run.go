package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/store"
)

// Run runs the background loops until ctx ends: the LISTEN/NOTIFY
// listener (cancel fan-out, job wake-ups), the polling fallback for queued
// jobs, and the sweeper, which runs in at most one gateway at a time
// (a Postgres advisory lock per pass). Every failure inside is logged and
// retried, so Run returns nil once ctx ends. Sessions work without Run,
// but then hear no cancels and no jobs created while they idle.
func (g *Gateway) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { g.listenLoop(ctx) })
	if g.cfg.PollInterval > 0 {
		wg.Go(func() { g.tick(ctx, g.cfg.PollInterval, g.poll) })
	}
	if g.cfg.SweepInterval > 0 {
		wg.Go(func() {
			g.tick(ctx, g.cfg.SweepInterval, func(ctx context.Context) {
				if _, err := g.sweepOnce(ctx); err != nil && ctx.Err() == nil {
					g.log.Error("sweep", "err", err)
				}
			})
		})
	}
	wg.Wait()
	return nil
}

// tick calls fn every interval on the gateway's timers until ctx ends.
func (g *Gateway) tick(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.cfg.Clock.After(interval):
		}
		fn(ctx)
	}
}

// poll is the fallback for notifications that never came: it wakes the
// sessions offering a service that has leasable work.
func (g *Gateway) poll(ctx context.Context) {
	if sessions, _ := g.welcomed(); len(sessions) == 0 {
		return
	}
	rows, err := g.pool.Query(dbstat.WithOp(ctx, OpPoll), sqlQueuedServices, store.NowArg(g.now()))
	if err == nil {
		var services []string
		services, err = pgx.CollectRows(rows, pgx.RowTo[string])
		for _, sv := range services {
			g.wakeService(sv)
		}
	}
	if err != nil && ctx.Err() == nil {
		g.log.Warn("poll queued jobs", "err", err)
	}
}

// sweepOnce runs one sweep pass if no other gateway is sweeping. The
// advisory lock is transaction-scoped and held on its own pooled
// connection for the pass; the sweep's own transactions run beside it.
// ran is false when another gateway holds the lock.
func (g *Gateway) sweepOnce(ctx context.Context) (ran bool, err error) {
	tx, err := g.pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return false, fmt.Errorf("sweep lock: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := tx.QueryRow(ctx, sqlTrySweepLock, sweepLockKey).Scan(&ran); err != nil {
		return false, fmt.Errorf("sweep lock: %w", err)
	}
	if !ran {
		return false, nil
	}
	res, err := g.svc.Sweep(ctx, g.now())
	g.countSweep(res)
	// A sweep requeues only after losing an attempt, and its lost notice
	// comes before the requeue's jobs notice: the listener counts the
	// attempt_lost frame pending before that notice wakes an offer. Waking
	// the sessions here, at once, let the offer for the freed slot go out
	// before the frame (TestLostFrameGoesOutBeforeTheOfferForItsSlot), so
	// they are woken here only while no listener is subscribed, when
	// neither notice will arrive.
	if res.Requeued > 0 && !g.queues.trusted.Load() {
		g.jobsAvailable("")
	}
	return true, errors.Join(err, tx.Commit(ctx))
}

func (g *Gateway) countSweep(res protocol.SweepResult) {
	g.m.Sweeps.Inc()
	for kind, n := range map[string]int{"lost": res.Lost, "requeued": res.Requeued, "reverified": res.Reverified,
		"admission_expired": res.AdmissionExpired, "succeeded": res.Succeeded, "failed": res.Failed,
		"cancelled": res.Cancelled, "offline": res.Offline} {
		if n > 0 {
			g.m.SweepChanges.WithLabelValues(kind).Add(float64(n))
		}
	}
}
