package linearize

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/protocol"
)

// linStackWorkload is qualify's default round: fewer agents than the
// service-layer tests, buyers reading their jobs through the API.
var linStackWorkload = Workload{Seed: linSeed, Jobs: 10, AgentsPerDevice: 2, Adversaries: 8, Cancellers: 2, Watchers: 4,
	Duration: 4 * time.Second}

// The full stack's histories (device operations on the service layer,
// buyers' cancels and reads through the API, sweeps) are linearizable, and
// the reads saw jobs move: queued, then something else.
func TestStackHistoriesAreLinearizable(t *testing.T) {
	ctx := context.Background()
	if testPG == nil {
		pg, err := targets.OpenPostgres(ctx, "", io.Discard)
		require.NoError(t, err, "the linearizability tests need Postgres")
		testPG = pg
	}
	w, err := targets.NewPostgresWorkers(ctx, 1, "", testPG.NewDatabase)
	require.NoError(t, err)
	t.Cleanup(w.Close)
	target, err := NewStackTarget(ctx, w, linSeed)
	require.NoError(t, err)
	b := linRunTest(t, target, linStackWorkload)
	res := b.check(t, "stack")
	require.Equal(t, porcupine.Ok, res.Result, "not linearizable; see %s\n%s", res.VisualizePath, FormatCodes(Codes(b.history)))
	seen := map[protocol.JobStatus]bool{}
	for _, op := range b.history.Ops {
		if in, out := op.Input.(Input), op.Output.(Output); in.Op == GetJob {
			require.Equal(t, linJobView, out.Code, "a buyer's read of its own job found none")
			seen[out.Job] = true
		}
	}
	require.True(t, seen[protocol.JobQueued] && len(seen) > 1, "the reads saw %v", seen)
	require.Positive(t, linCount(b.history, Cancel, protocol.CodeCancelled, "")+linCount(b.history, Cancel, protocol.CodeCancelling, ""),
		"no cancel through the API took effect:\n%s", FormatCodes(Codes(b.history)))
	require.Positive(t, res.Longest)
}
