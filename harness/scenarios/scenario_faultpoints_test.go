//go:build faultpoints

package scenarios

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/faultpoint"
)

// qualify runs the scenarios beside the campaigns, in one process, and the
// campaigns' services hit every fault point on the process's registry
// (their sweeper and verifier finish commits constantly). A scenario arms,
// awaits and counts its points in its own services only: here the process
// registry is hit in a loop at the very point the scenario arms, and the
// scenario still blocks its own commit there, kills its gateway with the
// rows committing/verifying, and counts exactly its own two hits.
func TestScenarioFaultPointsAreItsOwn(t *testing.T) {
	env := scenarioEnv(t, EnvOptions{})
	s := catalogueEntry(t, "gateway_kill_between_commits")
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	hits := 0
	wg.Go(func() {
		for ctx.Err() == nil {
			faultpoint.Hit(ctx, faultpoint.CommitBeforeTx2) // a campaign's commit, on the process registry
			hits++
		}
	})
	res := RunScenario(context.Background(), env, s)
	stop()
	wg.Wait()
	require.NotZero(t, hits)
	require.True(t, res.Passed, "%v\n%s", res.Err, renderTimeline(res))
	require.True(t, res.Reached)
}
