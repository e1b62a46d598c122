package model_test

import (
	"context"
	"testing"

	"github.com/rendermac/rendermac/harness/conformance"
	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/model"
)

// modelTarget is the model as the conformance suite drives it: it can
// revoke a device, and its invariant check adds the from-scratch check of
// the snapshot to the model's incremental one, so the two keep each other
// honest on every case.
type modelTarget struct{ *fuzz.ModelTarget }

func (m modelTarget) RevokeDevice(_ context.Context, id string) error {
	m.M.RevokeDevice(id)
	return nil
}

func (m modelTarget) CheckInvariants(ctx context.Context) ([]string, error) {
	vs, err := m.ModelTarget.CheckInvariants(ctx)
	credits := map[string]int64{}
	for _, b := range fuzz.WorldBuyers {
		credits[b.ID] = b.BalanceCents
	}
	return append(vs, model.SnapshotViolations(m.M.Snapshot(), credits)...), err
}

// TestConformance runs the contract's cases against the model.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Exercise(t, func(*testing.T) fuzz.Target {
		return modelTarget{fuzz.NewModelTarget(1, model.VariantNone)}
	}, conformance.Options{Strangers: true, RawRequests: true, MalformedFrames: true})
}
