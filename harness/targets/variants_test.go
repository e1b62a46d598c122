//go:build mutations

package targets

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/server/fencing"
)

// TestDifferentialCatchesBrokenServer proves the comparison can fail: a
// service layer that does not compare the epoch (or the token) on commit is
// caught as a divergence from the model and shrunk.
func TestDifferentialCatchesBrokenServer(t *testing.T) {
	for _, mut := range []fencing.Variant{fencing.VariantNoEpochCheck, fencing.VariantNoTokenCheck} {
		t.Run(string(mut), func(t *testing.T) {
			c, done := setup(t, mut, 1)
			defer done()
			c.Seeds = seeds(1, 30)
			res, err := c.Run(context.Background())
			require.NoError(t, err)
			require.NotEmpty(t, res.Failures, "%s was not caught", mut)
			first := res.Failures[0]
			require.Equal(t, fuzz.FailureDivergence, first.Result.Failure.Kind)
			require.NotNil(t, first.Shrunk)
			require.LessOrEqual(t, len(first.Shrunk.Events), first.Result.Failure.Step+1)
			t.Logf("%s: seed %d diverged at step %d; shrunk to %d events: %s", mut, first.Seed,
				first.Result.Failure.Step, len(first.Shrunk.Events), first.ShrunkRes.Failure)
		})
	}
}

// TestStackCatchesBrokenServer proves the full stack's comparison can
// fail: with the stack's service layer not comparing the epoch (or the
// token) on commit, while the Postgres target stays correct, the stack
// diverges from the model, and the failure is shrunk. It stops at the
// first failing seed, since every run builds a whole stack.
func TestStackCatchesBrokenServer(t *testing.T) {
	for _, mut := range []fencing.Variant{fencing.VariantNoEpochCheck, fencing.VariantNoTokenCheck} {
		t.Run(string(mut), func(t *testing.T) {
			b := setupStack(t, mut, 1)
			ctx := context.Background()
			c := b.campaign
			for seed := uint64(1); seed <= 30; seed++ {
				seq := fuzz.Generate(seed, c.Steps, c.Gen)
				res, err := fuzz.Run(ctx, c.Factory, 0, seq, c.Options)
				require.NoError(t, err)
				if res.Failure == nil {
					continue
				}
				require.Equal(t, fuzz.FailureDivergence, res.Failure.Kind, res.Failure.String())
				require.Equal(t, "model vs stack", res.Failure.Target)
				shrunk, sres, err := fuzz.Shrink(ctx, c.Factory, seq, c.Options, res, c.ShrinkBudget)
				require.NoError(t, err)
				require.NotNil(t, sres.Failure)
				require.Equal(t, "model vs stack", sres.Failure.Target)
				require.LessOrEqual(t, len(shrunk.Events), res.Failure.Step+1)
				t.Logf("%s: seed %d diverged at step %d; shrunk to %d events: %s", mut, seed, res.Failure.Step,
					len(shrunk.Events), sres.Failure)
				return
			}
			t.Fatalf("%s was not caught in 30 seeds", mut)
		})
	}
}
