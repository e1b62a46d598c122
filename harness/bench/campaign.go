package bench

import (
	"context"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/model"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/benchdb"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/server/fencing"
)

// The campaigns run as qualify runs them: the model's 200 events per
// sequence (qualify --steps), model-vs-Postgres's 100 (--pg-steps), the
// three-way's 60 (--stack-steps), the database ones with
// targets.WorkersPerCPU workers per CPU (--pg-workers' default).
const (
	campaignSteps = 200
	diffSteps     = 100
	threeWaySteps = 60
)

// dbWorkers is the database campaigns' workers, qualify's default.
func dbWorkers() int { return targets.WorkersPerCPU * runtime.NumCPU() }

// timeBoxed runs campaigns of one batch of seeds each until seconds have
// passed, and returns the totals. Whole sequences only: the rate is over
// completed sequences and their steps, divided by the wall time they took.
func timeBoxed(ctx context.Context, c fuzz.Campaign, batch int, seconds float64) CampaignRate {
	r := CampaignRate{Workers: c.Workers, StepsPerSq: c.Steps}
	t0 := time.Now()
	next := uint64(1)
	for time.Since(t0).Seconds() < seconds && ctx.Err() == nil {
		c.Seeds = c.Seeds[:0]
		for range batch {
			c.Seeds = append(c.Seeds, next)
			next++
		}
		res, err := c.Run(ctx)
		if err != nil {
			r.Error = err.Error()
			break
		}
		r.Seeds += res.Seeds
		r.Steps += res.Steps
		r.Failures += len(res.Failures)
	}
	r.Seconds = time.Since(t0).Seconds()
	r.StepsPerS = float64(r.Steps) / r.Seconds
	r.SeqsPerS = float64(r.Seeds) / r.Seconds
	return r
}

// modelRate is the model alone with its invariant checks after every step
// (fuzz --target model).
func modelRate(ctx context.Context, seconds float64) CampaignRate {
	workers := runtime.NumCPU()
	c := fuzz.Campaign{Gen: fuzz.DefaultGenConfig, Steps: campaignSteps, Workers: workers,
		Factory: func(_ context.Context, _ int, seed uint64) ([]fuzz.Target, error) {
			return []fuzz.Target{fuzz.NewModelTarget(seed, model.Variant(""))}, nil
		}}
	return timeBoxed(ctx, c, 4*workers, seconds)
}

// diffRate is the model against Postgres step by step, states compared
// (fuzz --target both), one database per worker on the bench cluster.
func diffRate(ctx context.Context, pg *pgprovider.Provider, seconds float64) CampaignRate {
	workers := dbWorkers()
	w, err := targets.NewPostgresWorkers(ctx, workers, fencing.VariantNone, (&targets.Postgres{Provider: pg}).NewWorkerDatabase)
	if err != nil {
		return CampaignRate{Error: err.Error()}
	}
	defer w.Close()
	c := fuzz.Campaign{Factory: w.Factory(""), Options: fuzz.Options{Outputs: targets.SyntheticOutput, CompareState: true},
		Gen: fuzz.DefaultGenConfig, Steps: diffSteps, Workers: workers}
	r := timeBoxed(ctx, c, 2*workers, seconds)
	r.RoundTripsPerStep = perStep(w.RoundTrips(), r.Steps)
	return r
}

// perStep is n over steps, 0 without steps.
func perStep(n int64, steps int) float64 {
	if steps == 0 {
		return 0
	}
	return float64(n) / float64(steps)
}

// threeWayRate is model, Postgres layer and full stack step by step,
// states compared (fuzz --target stack), one database and one stack per
// worker on the bench cluster.
func threeWayRate(ctx context.Context, pg *pgprovider.Provider, seconds float64) CampaignRate {
	workers := dbWorkers()
	newDB := (&targets.Postgres{Provider: pg}).NewWorkerDatabase
	w, err := targets.NewPostgresWorkers(ctx, workers, fencing.VariantNone, newDB)
	if err != nil {
		return CampaignRate{Error: err.Error()}
	}
	defer w.Close()
	st, err := targets.NewStackWorkers(ctx, workers, fencing.VariantNone, newDB)
	if err != nil {
		return CampaignRate{Error: err.Error()}
	}
	defer st.Close()
	c := fuzz.Campaign{Factory: targets.ThreeWayFactory(w, st), Options: fuzz.Options{Outputs: targets.SyntheticOutput, CompareState: true},
		Gen: fuzz.DefaultGenConfig, Steps: threeWaySteps, Workers: workers}
	r := timeBoxed(ctx, c, 2*workers, seconds)
	r.RoundTripsPerStep = perStep(w.RoundTrips()+st.RoundTrips(), r.Steps)
	return r
}

// measured runs a campaign against the bench cluster and adds its
// statements per step (every database's, read around it) and the
// round-trip limit at its concurrency (pgbench SELECT 1 just after).
func measured(ctx context.Context, pg *pgprovider.Provider, cfg Config, run func() CampaignRate) CampaignRate {
	stmts, err := newStmtReader(ctx, pg.AdminURL(), "")
	var before stmtCounts
	if err == nil {
		before, err = stmts.snapshot(ctx)
	}
	r := run()
	if r.Error != "" {
		return r
	}
	var after stmtCounts
	if err == nil {
		after, err = stmts.snapshot(ctx)
	}
	if err == nil {
		r.StatementsPerStep = mix(before, after, r.Steps).PerJob
		err = campaignSelect1(ctx, pg, cfg, &r)
	}
	if err != nil {
		r.Error = "rate measured; its limit not: " + err.Error()
	}
	return r
}

// campaignSelect1Seconds bounds the campaigns' SELECT 1 runs: a rate of
// some ten thousand per second settles within a second or two, and make
// bench runs two of them.
const campaignSelect1Seconds = 3

// campaignSelect1 runs pgbench SELECT 1 at the campaign's concurrency on a
// fresh clone of the template, over the Unix-domain socket the campaign's
// workers use (targets.Postgres.NewWorkerDatabase).
func campaignSelect1(ctx context.Context, pg *pgprovider.Provider, cfg Config, r *CampaignRate) error {
	bin, err := benchdb.FindPgbench()
	if err != nil {
		return err
	}
	return withClone(ctx, pg, func(url string, pool *pgxpool.Pool) error {
		r.Select1TPS, err = select1TPS(ctx, pool, bin, pg.SocketURL(url), r.Workers, min(cfg.PgbenchSeconds, campaignSelect1Seconds))
		return err
	})
}
