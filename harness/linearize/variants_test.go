//go:build mutations

package linearize

import (
	"testing"
	"time"

	"github.com/rendermac/rendermac/server/fencing"
)

// TestLinearizabilityCatchesUnfencedPostgres: a service that does not
// compare the epoch (or the token) on commit accepts the perturbed commits
// the workload sends on every committing attempt, and the history is
// refuted.
func TestLinearizabilityCatchesUnfencedPostgres(t *testing.T) {
	for _, tc := range []struct {
		mut fencing.Variant
		gun string
	}{
		{fencing.VariantNoEpochCheck, linWrongEpoch},
		{fencing.VariantNoTokenCheck, linStaleToken},
	} {
		t.Run(string(tc.mut), func(t *testing.T) {
			w := Workload{Seed: linSeed, Duration: 3 * time.Second}
			b := linRunTest(t, linPostgresTarget(t, tc.mut), w)
			linRequireCaught(t, b, b.check(t, "postgres-"+string(tc.mut)), tc.gun)
		})
	}
}
