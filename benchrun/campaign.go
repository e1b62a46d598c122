package benchrun

import (
	"context"
	"runtime"
	"time"

	"github.com/rendermac/rendermac/faults"
	"github.com/rendermac/rendermac/faults/targets"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/server"
	"github.com/rendermac/rendermac/sim"
)

// campaignSteps is events per sequence, the campaigns' default (fuzz --steps).
const campaignSteps = 200

// timeBoxed runs campaigns of one batch of seeds each until seconds have
// passed, and returns the totals. Whole sequences only: the rate is over
// completed sequences and their steps, divided by the wall time they took.
func timeBoxed(ctx context.Context, c faults.Campaign, batch int, seconds float64) CampaignRate {
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
	c := faults.Campaign{Gen: faults.DefaultGenConfig, Steps: campaignSteps, Workers: workers,
		Factory: func(_ context.Context, _ int, seed uint64) ([]faults.Target, error) {
			return []faults.Target{faults.NewModelTarget(seed, sim.Variant(""))}, nil
		}}
	return timeBoxed(ctx, c, 4*workers, seconds)
}

// diffRate is the model against Postgres step by step, states compared
// (fuzz --target both), one database per worker on the bench cluster.
func diffRate(ctx context.Context, pg *pgprovider.Provider, seconds float64) CampaignRate {
	workers := runtime.NumCPU()
	w, err := targets.NewPostgresWorkers(ctx, workers, server.VariantNone, func(ctx context.Context) (string, error) {
		return pg.NewDatabase(ctx, targets.TemplateName)
	})
	if err != nil {
		return CampaignRate{Error: err.Error()}
	}
	defer w.Close()
	c := faults.Campaign{Factory: w.Factory(""), Options: faults.Options{Outputs: targets.SyntheticOutput, CompareState: true},
		Gen: faults.DefaultGenConfig, Steps: campaignSteps, Workers: workers}
	return timeBoxed(ctx, c, workers, seconds)
}
