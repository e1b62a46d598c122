//go:build mutations

package targets

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/server/fencing"
)

// TestCampaignSameForAnyWorkerCount runs one campaign (a broken server, so
// failures and their shrink are in the result too) with one worker and
// with three, each worker on its own template-cloned database: the merged
// results are identical.
func TestCampaignSameForAnyWorkerCount(t *testing.T) {
	run := func(workers int) fuzz.CampaignResult {
		c, done := setup(t, fencing.VariantCancelQueuedNoop, workers)
		defer done()
		c.Seeds, c.Steps, c.ShrinkBudget = seeds(300, 9), 50, 20
		res, err := c.Run(context.Background())
		require.NoError(t, err)
		return res
	}
	one, three := run(1), run(3)
	require.NotEmpty(t, one.Failures, "the broken server was never caught: the comparison has nothing to show")
	require.Equal(t, one, three)
}
