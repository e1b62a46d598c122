package targets

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/server/fencing"
)

// stackBundle is a three-way campaign (model, Postgres service layer, full
// stack) with the full stack's service layer broken by mut.
type stackBundle struct {
	campaign fuzz.Campaign
	stack    *StackWorkers
	// close releases the workers' pools; before is what ran before them.
	close  func()
	before goleak.Option
}

func setupStack(t testing.TB, mut fencing.Variant, workers int) *stackBundle {
	t.Helper()
	ctx := context.Background()
	pg := sharedPG(t)
	before := goleak.IgnoreCurrent()
	pgw, err := NewPostgresWorkers(ctx, workers, fencing.VariantNone, pg.NewDatabase)
	require.NoError(t, err)
	sw, err := NewStackWorkers(ctx, workers, mut, pg.NewDatabase)
	require.NoError(t, err)
	done := func() {
		sw.Close()
		pgw.Close()
	}
	t.Cleanup(done)
	c := fuzz.Campaign{Factory: ThreeWayFactory(pgw, sw), Gen: fuzz.DefaultGenConfig, Steps: 60, Workers: workers,
		Options: fuzz.Options{Outputs: SyntheticOutput, CompareState: true}, ShrinkBudget: 100}
	return &stackBundle{campaign: c, stack: sw, close: done, before: before}
}

// TestModelPostgresAndStackAgree replays seeded sequences against the
// model, the Postgres service layer and the full stack (API, gateways,
// WebSockets), comparing every reply and the projected rows after every
// step, and checking every target's invariants.
func TestModelPostgresAndStackAgree(t *testing.T) {
	b := setupStack(t, fencing.VariantNone, 2)
	b.campaign.Seeds = seeds(2000, 30)
	res, err := b.campaign.Run(context.Background())
	require.NoError(t, err)
	for _, f := range res.Failures {
		t.Errorf("seed %d: %s\nreplay: go run ./cmd/rendermac fuzz --target stack --seed %d --steps 60", f.Seed, f.Result.Failure, f.Seed)
	}
	require.Equal(t, 30*60, res.Steps)
	require.Positive(t, res.Codes["output_sealed"], "the campaign never tried a late upload")
	require.Positive(t, res.Codes["upload_ok"], "the campaign never uploaded to a live attempt")
	require.Positive(t, res.Codes["commit_ok"], "the campaign never reached a successful commit")
	m := &b.stack.Marks
	for name, n := range map[string]int64{
		"lease offers over the wire": m.WireOffers.Load(), "leases without an offer": m.NoOffers.Load(),
		"whole commits over the wire": m.WireCommits.Load(), "transaction-1-only commits": m.SplitCommits.Load(),
		"progress frames": m.Progress.Load(), "fail frames": m.Fails.Load(),
		"lease_epoch < 1 frames": m.BadEpochFrames.Load(), "undone heartbeats": m.HeartbeatsUndone.Load(),
	} {
		require.Positive(t, n, "the stack driver never reached: %s", name)
	}
	// Each of a worker's pools counts its round trips, the gateways' too
	// (bench's round trips per step).
	var total int64
	for _, r := range b.stack.res {
		for name, p := range map[string]*pgxpool.Pool{"harness and API": r.pool, "frames gateway": r.poolF, "lease gateway": r.poolL} {
			n := roundTrips(p)
			require.Positive(t, n, "the %s pool counted no round trip", name)
			total += n
		}
	}
	require.Equal(t, total, b.stack.RoundTrips())
	// Every run's gateways, sessions, listener and clients are gone.
	b.close()
	goleak.VerifyNone(t, b.before)
	t.Logf("stack marks: offers %d, no offer %d, wire commits %d, split commits %d, bad epochs %d, heartbeats undone %d, cancel notices %d, lost notices %d",
		m.WireOffers.Load(), m.NoOffers.Load(), m.WireCommits.Load(), m.SplitCommits.Load(),
		m.BadEpochFrames.Load(), m.HeartbeatsUndone.Load(), m.CancelNotices.Load(), m.LostNotices.Load())
}
