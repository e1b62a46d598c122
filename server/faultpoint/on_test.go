//go:build faultpoints

package faultpoint_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/faultpoint"
)

// reset disarms everything when the test ends; the registry is global, so
// these tests do not run in parallel.
func reset(t *testing.T) {
	t.Helper()
	faultpoint.Clear()
	t.Cleanup(faultpoint.Clear)
}

func TestHitRunsOnlyTheArmedAction(t *testing.T) {
	reset(t)
	require.True(t, faultpoint.Enabled)
	var got []string
	faultpoint.Set(faultpoint.FailBeforeTx, faultpoint.Inject(func(context.Context) { got = append(got, "fail") }))
	ctx := context.Background()
	faultpoint.Hit(ctx, faultpoint.CancelBeforeTx)
	faultpoint.Hit(ctx, faultpoint.FailBeforeTx)
	faultpoint.Hit(ctx, faultpoint.FailBeforeTx)
	require.Equal(t, []string{"fail", "fail"}, got)
	require.Equal(t, int64(2), faultpoint.Hits(faultpoint.FailBeforeTx))
	require.Equal(t, int64(1), faultpoint.Hits(faultpoint.CancelBeforeTx), "unarmed hits are counted too")
	require.Equal(t, []string{faultpoint.FailBeforeTx}, faultpoint.Armed())

	faultpoint.Set(faultpoint.FailBeforeTx, nil)
	faultpoint.Hit(ctx, faultpoint.FailBeforeTx)
	require.Len(t, got, 2, "a nil action disarms")
	require.Empty(t, faultpoint.Armed())

	faultpoint.Set(faultpoint.FailBeforeTx, faultpoint.Inject(func(context.Context) { got = append(got, "again") }))
	faultpoint.Clear()
	faultpoint.Hit(ctx, faultpoint.FailBeforeTx)
	require.Len(t, got, 2, "Clear disarms")
	require.Equal(t, int64(1), faultpoint.Hits(faultpoint.FailBeforeTx), "Clear resets the counters")
}

// A registry of its own neither fires nor counts the process's hits, and
// the process's registry neither fires nor counts its hits; a nil registry
// is the process's.
func TestRegistriesAreApart(t *testing.T) {
	reset(t)
	ctx := context.Background()
	var own, proc int
	p := faultpoint.New()
	p.Set(faultpoint.CommitBeforeTx2, faultpoint.Inject(func(context.Context) { own++ }))
	faultpoint.Set(faultpoint.CommitBeforeTx2, faultpoint.Inject(func(context.Context) { proc++ }))

	faultpoint.Hit(ctx, faultpoint.CommitBeforeTx2)
	var none *faultpoint.Points
	none.Hit(ctx, faultpoint.CommitBeforeTx2)
	require.Equal(t, []int{0, 2}, []int{own, proc})
	require.Equal(t, int64(0), p.Hits(faultpoint.CommitBeforeTx2))
	require.Equal(t, int64(2), faultpoint.Hits(faultpoint.CommitBeforeTx2))

	p.Hit(ctx, faultpoint.CommitBeforeTx2)
	require.Equal(t, []int{1, 2}, []int{own, proc})
	require.Equal(t, int64(1), p.Hits(faultpoint.CommitBeforeTx2))
	require.Equal(t, int64(2), faultpoint.Hits(faultpoint.CommitBeforeTx2))

	p.Clear()
	require.Empty(t, p.Armed())
	require.Equal(t, []string{faultpoint.CommitBeforeTx2}, faultpoint.Armed(), "clearing one registry leaves the other armed")
}

func TestInjectSeesTheCallersContext(t *testing.T) {
	reset(t)
	type key struct{}
	var seen any
	faultpoint.Set(faultpoint.SweepAfterTx, faultpoint.Inject(func(ctx context.Context) { seen = ctx.Value(key{}) }))
	faultpoint.Hit(context.WithValue(context.Background(), key{}, "sweeper"), faultpoint.SweepAfterTx)
	require.Equal(t, "sweeper", seen)
}

func TestSetUnknownPointPanics(t *testing.T) {
	reset(t)
	require.PanicsWithValue(t, `faultpoint: unknown point "commit.befor_tx2" (known: commit.before_tx1, commit.after_tx1, `+
		`commit.during_verify, commit.before_tx2, commit.after_tx2, fail.before_tx, fail.after_tx, cancel.before_tx, `+
		`cancel.after_tx, sweep.before_tx, sweep.after_tx, gateway.before_slot_release, gateway.after_offer_write, create.before_insert, lease.before_pick, `+
		`lease.after_pick, gateway.before_lost_frame, prune.before_tx, prune.before_store_delete)`,
		func() { faultpoint.Set("commit.befor_tx2", faultpoint.Kill()) })
}

func TestBlockWaitsForReleaseOrContext(t *testing.T) {
	reset(t)
	release := make(chan struct{})
	faultpoint.Set(faultpoint.CommitDuringVerify, faultpoint.Block(release))
	done := make(chan struct{})
	go func() {
		defer close(done)
		faultpoint.Hit(context.Background(), faultpoint.CommitDuringVerify)
	}()
	require.Eventually(t, func() bool { return faultpoint.Hits(faultpoint.CommitDuringVerify) == 1 }, 5*time.Second, time.Millisecond)
	select {
	case <-done:
		t.Fatal("Hit returned before the block was released")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-done

	ctx, cancel := context.WithCancel(context.Background())
	faultpoint.Set(faultpoint.CommitDuringVerify, faultpoint.Block(make(chan struct{})))
	cancel()
	faultpoint.Hit(ctx, faultpoint.CommitDuringVerify) // returns: ctx is done
}

func TestOnceRunsAtTheFirstHitOnly(t *testing.T) {
	reset(t)
	var n atomic.Int64
	faultpoint.Set(faultpoint.GatewayBeforeSlotRelease, faultpoint.Once(faultpoint.Inject(func(context.Context) { n.Add(1) })))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { faultpoint.Hit(context.Background(), faultpoint.GatewayBeforeSlotRelease) })
	}
	wg.Wait()
	require.Equal(t, int64(1), n.Load())
	require.Equal(t, int64(8), faultpoint.Hits(faultpoint.GatewayBeforeSlotRelease))
}

// Hit reads the registry without a lock while Set replaces it (run with -race).
func TestHitAndSetConcurrently(t *testing.T) {
	reset(t)
	var n atomic.Int64
	count := faultpoint.Inject(func(context.Context) { n.Add(1) })
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				faultpoint.Hit(ctx, faultpoint.CancelAfterTx)
			}
		})
	}
	for i := range 200 {
		if i%2 == 0 {
			faultpoint.Set(faultpoint.CancelAfterTx, count)
		} else {
			faultpoint.Set(faultpoint.CancelAfterTx, nil)
		}
	}
	stop()
	wg.Wait()
	require.LessOrEqual(t, n.Load(), faultpoint.Hits(faultpoint.CancelAfterTx))
}

func TestEnableFromEnv(t *testing.T) {
	reset(t)
	t.Setenv(faultpoint.EnvVar, "")
	require.NoError(t, faultpoint.EnableFromEnv())
	require.Empty(t, faultpoint.Armed())

	t.Setenv(faultpoint.EnvVar, " commit.before_tx2=kill , sweep.before_tx = block ")
	require.NoError(t, faultpoint.EnableFromEnv())
	require.Equal(t, []string{faultpoint.CommitBeforeTx2, faultpoint.SweepBeforeTx}, faultpoint.Armed())

	// block waits for the caller's context.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	faultpoint.Hit(ctx, faultpoint.SweepBeforeTx)
	require.GreaterOrEqual(t, time.Since(start), 15*time.Millisecond)
}

func TestEnableFromEnvArmsNothingOnError(t *testing.T) {
	for _, tc := range []struct{ spec, msg string }{
		{"commit.before_tx2=kill,commit.before_tx3=kill", `unknown fault point "commit.before_tx3"`},
		{"commit.before_tx2=kill,fail.after_tx=explode", `fail.after_tx: unknown action "explode"`},
		{"commit.before_tx2", `"commit.before_tx2" is not name=action`},
		{"fail.after_tx=block,fail.after_tx=kill", "fail.after_tx is named twice"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			reset(t)
			t.Setenv(faultpoint.EnvVar, tc.spec)
			err := faultpoint.EnableFromEnv()
			require.ErrorContains(t, err, tc.msg)
			require.ErrorContains(t, err, faultpoint.EnvVar)
			require.Empty(t, faultpoint.Armed())
		})
	}
}
