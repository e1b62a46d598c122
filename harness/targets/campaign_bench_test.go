package targets

import (
	"context"
	"runtime"
	"testing"

	"github.com/rendermac/rendermac/server/fencing"
)

// BenchmarkDiffCampaign runs the model-vs-Postgres campaign as qualify
// does (100 steps a seed, WorkersPerCPU workers per CPU, the default
// comparisons) and reports steps/s.
func BenchmarkDiffCampaign(b *testing.B) {
	workers := WorkersPerCPU * runtime.NumCPU()
	c, done := setup(b, fencing.VariantNone, workers)
	defer done()
	benchCampaign(b, func(first int) (int, error) {
		c.Seeds = seeds(first, 4*workers)
		res, err := c.Run(context.Background())
		if err == nil && len(res.Failures) > 0 {
			b.Fatalf("seed %d: %s", res.Failures[0].Seed, res.Failures[0].Result.Failure)
		}
		return res.Steps, err
	})
}

// BenchmarkStackCampaign runs the three-way campaign (model, Postgres,
// full stack; 60 steps a seed, as qualify does) and reports steps/s.
func BenchmarkStackCampaign(b *testing.B) {
	workers := WorkersPerCPU * runtime.NumCPU()
	sb := setupStack(b, fencing.VariantNone, workers)
	benchCampaign(b, func(first int) (int, error) {
		sb.campaign.Seeds = seeds(first, 2*workers)
		res, err := sb.campaign.Run(context.Background())
		if err == nil && len(res.Failures) > 0 {
			b.Fatalf("seed %d: %s", res.Failures[0].Seed, res.Failures[0].Result.Failure)
		}
		return res.Steps, err
	})
}

// benchCampaign runs run with fresh seeds each iteration and reports the
// steps it played per second of the timed loop.
func benchCampaign(b *testing.B, run func(first int) (int, error)) {
	b.Helper()
	steps := 0
	for i := 0; b.Loop(); i++ {
		n, err := run(5000 + 1000*i)
		if err != nil {
			b.Fatal(err)
		}
		steps += n
	}
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
}
