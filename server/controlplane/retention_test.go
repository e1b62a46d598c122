package controlplane

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/server/fencing"
)

// The retention loop prunes at start and then every interval of its
// clock, each time against that moment less the retention.
func TestRetentionPrunesAtStartAndEveryInterval(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clock.NewStub(t0)
	bounds := make(chan time.Time, 4)
	r := retention{retain: 90 * 24 * time.Hour, every: time.Hour, clk: clk, log: slog.New(slog.DiscardHandler),
		now: func(context.Context) (time.Time, error) { return clk.Now(), nil },
		prune: func(_ context.Context, olderThan time.Time, batch int) (fencing.PruneStats, error) {
			require.Equal(t, fencing.DefaultPruneBatch, batch)
			bounds <- olderThan
			return fencing.PruneStats{Jobs: 1}, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.run(ctx) }()
	require.Equal(t, t0.Add(-90*24*time.Hour), <-bounds)
	for clk.Waiters() == 0 {
		time.Sleep(time.Millisecond) // until the loop waits on the stub clock
	}
	clk.Advance(time.Hour)
	require.Equal(t, t0.Add(time.Hour-90*24*time.Hour), <-bounds)
	cancel()
	<-done
}
