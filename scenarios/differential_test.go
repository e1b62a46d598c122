package scenarios

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/faults"
	"github.com/rendermac/rendermac/server"
)

var testPG *Postgres

func TestMain(m *testing.M) {
	code := m.Run()
	if testPG != nil {
		_ = testPG.Close()
	}
	os.Exit(code)
}

// setup returns a campaign over the model and Postgres with the server
// broken by mut ("" for the real one).
func setup(t *testing.T, mut server.Mutation, workers int) (faults.Campaign, func()) {
	t.Helper()
	ctx := context.Background()
	if testPG == nil {
		pg, err := OpenPostgres(ctx, "", io.Discard)
		require.NoError(t, err, "the differential tests need Postgres")
		testPG = pg
	}
	w, err := NewPostgresWorkers(ctx, workers, mut, testPG.NewDatabase)
	require.NoError(t, err)
	c := faults.Campaign{Factory: w.Factory(""), Gen: faults.DefaultGenConfig, Steps: 100, Workers: workers,
		Options: faults.Options{Outputs: SyntheticOutput, CompareState: true}, ShrinkBudget: 150}
	return c, w.Close
}

func seeds(first, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(first + i)
	}
	return out
}

// TestModelAndPostgresAgree replays seeded sequences against the model and
// the Postgres service layer, comparing every reply and the projected rows
// after every step, and checking both sets of invariants.
func TestModelAndPostgresAgree(t *testing.T) {
	c, done := setup(t, server.MutationNone, 2)
	defer done()
	c.Seeds = seeds(1000, 40)
	res, err := c.Run(context.Background())
	require.NoError(t, err)
	for _, f := range res.Failures {
		t.Errorf("seed %d: %s\nreplay: go run ./cmd/rendermac fuzz --target both --seed %d --steps 100", f.Seed, f.Result.Failure, f.Seed)
	}
	require.Equal(t, 40*100, res.Steps)
	require.Positive(t, res.Codes["commit_ok"], "the campaign never reached a successful commit")
}

// TestDifferentialCatchesBrokenServer proves the comparison can fail: a
// service layer that does not compare the epoch (or the token) on commit is
// caught as a divergence from the model and shrunk.
func TestDifferentialCatchesBrokenServer(t *testing.T) {
	for _, mut := range []server.Mutation{server.MutationNoEpochCheck, server.MutationNoTokenCheck} {
		t.Run(string(mut), func(t *testing.T) {
			c, done := setup(t, mut, 1)
			defer done()
			c.Seeds = seeds(1, 30)
			res, err := c.Run(context.Background())
			require.NoError(t, err)
			require.NotEmpty(t, res.Failures, "%s was not caught", mut)
			first := res.Failures[0]
			require.Equal(t, faults.FailureDivergence, first.Result.Failure.Kind)
			require.NotNil(t, first.Shrunk)
			require.LessOrEqual(t, len(first.Shrunk.Events), first.Result.Failure.Step+1)
			t.Logf("%s: seed %d diverged at step %d; shrunk to %d events: %s", mut, first.Seed,
				first.Result.Failure.Step, len(first.Shrunk.Events), first.ShrunkRes.Failure)
		})
	}
}
