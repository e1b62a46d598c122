package fuzz

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/model"
)

func TestModelRunsAreDeterministic(t *testing.T) {
	t.Parallel()
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	got, err := CheckDeterminism(context.Background(), modelFactory(model.VariantNone), Options{CompareState: true}, DefaultGenConfig, seeds, 120)
	require.NoError(t, err)
	require.Empty(t, got)
}

// A target whose ids do not follow the seed alone (here: a counter across
// runs) is caught, at the first step whose replies or rows differ.
func TestCheckDeterminismFindsTheFirstDifferingStep(t *testing.T) {
	t.Parallel()
	var runs atomic.Uint64
	leaky := func(_ context.Context, _ int, seed uint64) ([]Target, error) {
		return []Target{NewModelTarget(seed+1000*runs.Add(1), model.VariantNone)}, nil
	}
	got, err := CheckDeterminism(context.Background(), leaky, Options{}, DefaultGenConfig, []uint64{3}, 120)
	require.NoError(t, err)
	require.Len(t, got, 1)
	d := got[0]
	require.Equal(t, uint64(3), d.Seed)
	require.NotEqual(t, d.First, d.Second)
	seq := Generate(3, 120, DefaultGenConfig)
	require.Equal(t, seq.Events[d.Step], d.Event)
	require.Contains(t, d.String(), "runs differ at step")
}
