package fuzz

import (
	"github.com/rendermac/rendermac/internal/provenance"

	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/model"
)

func modelFactory(mut model.Variant) Factory {
	return func(_ context.Context, _ int, seed uint64) ([]Target, error) {
		return []Target{NewModelTarget(seed, mut)}, nil
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	t.Parallel()
	a := Generate(42, 300, DefaultGenConfig)
	b := Generate(42, 300, DefaultGenConfig)
	c := Generate(43, 300, DefaultGenConfig)
	require.Equal(t, a, b)
	require.NotEqual(t, a.Events, c.Events)
	require.Len(t, a.Events, 300)
}

func TestEventTextRoundTrip(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 20; seed++ {
		for _, ev := range Generate(seed, 200, DefaultGenConfig).Events {
			got, err := ParseEvent(ev.String())
			require.NoError(t, err, ev.String())
			require.Equal(t, ev, got, ev.String())
		}
	}
	_, err := ParseEvent("commit job=x")
	require.ErrorContains(t, err, `field "job"`)
	_, err = ParseEvent("teleport")
	require.ErrorContains(t, err, "unknown op")
}

func TestReplayFileRoundTrip(t *testing.T) {
	t.Parallel()
	rf := ReplayFile{Target: "model", Variant: "keep_slot", Seq: Generate(7, 50, DefaultGenConfig), Weights: DefaultGenConfig.WeightsString(),
		Build: provenance.Build{Commit: "abc123", Dirty: true, GoVersion: "go1.26.8", SchemaVersion: 2,
			ModelVersion: "1+aaaaaaaaaaaa", GeneratorVersion: GeneratorVersion()}}
	var buf bytes.Buffer
	require.NoError(t, WriteReplay(&buf, rf))
	got, err := ReadReplay(&buf)
	require.NoError(t, err)
	require.Equal(t, rf, got)
	_, err = ReadReplay(bytes.NewBufferString("seed 1\nlease dev=zero\n"))
	require.ErrorContains(t, err, "line 2")
}

// TestModelCampaign is the randomized invariant check of the foundation:
// 500 seeds of 200 events, invariants checked after every step, and the
// campaign must actually reach the outcomes it exists to exercise.
func TestModelCampaign(t *testing.T) {
	t.Parallel()
	seeds := make([]uint64, 500)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	res, err := Campaign{Factory: modelFactory(model.VariantNone), Gen: DefaultGenConfig, Seeds: seeds, Steps: 200, Workers: 2}.Run(context.Background())
	require.NoError(t, err)
	for _, f := range res.Failures {
		t.Errorf("seed %d: %s (replay: go run ./cmd/rendermac fuzz --target model --seed %d --steps 200)", f.Seed, f.Result.Failure, f.Seed)
	}
	require.Equal(t, 500*200, res.Steps)
	// The coverage gate's list: every transition the rules take, every
	// reply code (lease_conflict by reason), every fault kind.
	req := RequiredCoverage()
	for what, need := range map[string]struct {
		keys []string
		got  map[string]int64
	}{
		"job transition":     {req.JobTransitions, res.Coverage.JobTransitions},
		"attempt transition": {req.AttemptTransitions, res.Coverage.AttemptTransitions},
		"reply":              {req.Replies, res.Coverage.Replies},
		"fault":              {req.Faults, res.Coverage.Faults},
	} {
		for _, k := range need.keys {
			require.Positive(t, need.got[k], "the campaign never reached %s %s", what, k)
		}
	}
}

// TestCampaignCatchesBrokenModels proves the randomized check can fail: each
// deliberately broken variant is caught, shrunk to a shorter sequence, and
// the shrunk sequence still fails when replayed.
func TestCampaignCatchesBrokenModels(t *testing.T) {
	t.Parallel()
	for _, mut := range []model.Variant{model.VariantCommitFromCancelling, model.VariantNoEpochCheck,
		model.VariantRequeuePastBudget, model.VariantKeepSlot, model.VariantWithdrawCharged} {
		t.Run(string(mut), func(t *testing.T) {
			t.Parallel()
			seeds := make([]uint64, 300)
			for i := range seeds {
				seeds[i] = uint64(i + 1)
			}
			f := modelFactory(mut)
			res, err := Campaign{Factory: f, Gen: DefaultGenConfig, Seeds: seeds, Steps: 200, Workers: 1}.Run(context.Background())
			require.NoError(t, err)
			require.NotEmpty(t, res.Failures, "variant %s was not caught", mut)
			first := res.Failures[0]
			require.NotNil(t, first.Shrunk)
			require.Less(t, len(first.Shrunk.Events), first.Result.Failure.Step+1, "shrinking removed nothing")
			again, err := Run(context.Background(), f, 0, *first.Shrunk, Options{})
			require.NoError(t, err)
			require.NotNil(t, again.Failure, "the shrunk sequence no longer fails")
			require.Equal(t, first.Result.Failure.Kind, again.Failure.Kind)
			t.Logf("%s: caught at seed %d step %d, shrunk to %d events: %s", mut, first.Seed,
				first.Result.Failure.Step, len(first.Shrunk.Events), again.Failure)
		})
	}
}
