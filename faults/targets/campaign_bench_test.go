package targets

import (
	"context"
	"testing"

	"github.com/rendermac/rendermac/server"
)

// BenchmarkDiffCampaign runs the model-vs-Postgres campaign (100 steps a
// seed, two workers, the qualify gate's comparisons) and reports steps/s.
func BenchmarkDiffCampaign(b *testing.B) {
	c, done := setup(b, server.VariantNone, 2)
	defer done()
	benchCampaign(b, func(first int) (int, error) {
		c.Seeds = seeds(first, 20)
		res, err := c.Run(context.Background())
		if err == nil && len(res.Failures) > 0 {
			b.Fatalf("seed %d: %s", res.Failures[0].Seed, res.Failures[0].Result.Failure)
		}
		return res.Steps, err
	})
}

// BenchmarkStackCampaign runs the three-way campaign (model, Postgres,
// full stack; 60 steps a seed, two workers) and reports steps/s.
func BenchmarkStackCampaign(b *testing.B) {
	sb := setupStack(b, server.VariantNone, 2)
	benchCampaign(b, func(first int) (int, error) {
		sb.campaign.Seeds = seeds(first, 10)
		res, err := sb.campaign.Run(context.Background())
		if err == nil && len(res.Failures) > 0 {
			b.Fatalf("seed %d: %s", res.Failures[0].Seed, res.Failures[0].Result.Failure)
		}
		return res.Steps, err
	})
}

func benchCampaign(b *testing.B, run func(first int) (int, error)) {
	b.Helper()
	steps := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		n, err := run(5000 + 100*i)
		if err != nil {
			b.Fatal(err)
		}
		steps += n
	}
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
}
