package targets

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/server/fencing"
)

var testPG *Postgres

func TestMain(m *testing.M) {
	code := m.Run()
	if testPG != nil {
		_ = testPG.Close()
	}
	os.Exit(code)
}

// sharedPG returns the package's embedded cluster, started by the first
// test that needs it and stopped by TestMain.
func sharedPG(t testing.TB) *Postgres {
	t.Helper()
	if testPG == nil {
		pg, err := OpenPostgres(context.Background(), "", io.Discard)
		require.NoError(t, err, "the differential tests need Postgres")
		testPG = pg
	}
	return testPG
}

// setup returns a campaign over the model and Postgres with the server
// broken by mut ("" for the real one).
func setup(t testing.TB, mut fencing.Variant, workers int) (fuzz.Campaign, func()) {
	t.Helper()
	ctx := context.Background()
	w, err := NewPostgresWorkers(ctx, workers, mut, sharedPG(t).NewDatabase)
	require.NoError(t, err)
	c := fuzz.Campaign{Factory: w.Factory(""), Gen: fuzz.DefaultGenConfig, Steps: 100, Workers: workers,
		Options: fuzz.Options{Outputs: SyntheticOutput, CompareState: true}, ShrinkBudget: 150}
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
	c, done := setup(t, fencing.VariantNone, 2)
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
