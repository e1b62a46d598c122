package api

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// One reading of the database clock serves for maxAge, carried forward by
// the local clock; then it is read again. A failed read is an error and is
// retried at the next call.
func TestDBClockCarriesOneReadingForward(t *testing.T) {
	db := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	local := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) // unrelated to db: only differences count
	reads := 0
	var fail error
	c := dbClock{maxAge: time.Second, local: func() time.Time { return local },
		read: func(context.Context) (time.Time, error) {
			reads++
			return db, fail
		}}
	ctx := context.Background()
	got, err := c.now(ctx)
	require.NoError(t, err)
	require.Equal(t, db, got)

	local = local.Add(400 * time.Millisecond)
	db = db.Add(400 * time.Millisecond) // the database's clock moves on alike
	got, err = c.now(ctx)
	require.NoError(t, err)
	require.Equal(t, db, got)
	require.Equal(t, 1, reads, "within maxAge: carried forward, not read")

	local = local.Add(600 * time.Millisecond) // the reading is maxAge old
	db = db.Add(600*time.Millisecond + 3*time.Millisecond)
	got, err = c.now(ctx)
	require.NoError(t, err)
	require.Equal(t, db, got, "read again: the database's own value")
	require.Equal(t, 2, reads)

	local = local.Add(2 * time.Second)
	fail = errors.New("connection refused")
	_, err = c.now(ctx)
	require.ErrorIs(t, err, fail)
	fail = nil
	_, err = c.now(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, reads, "a failed read is read again at the next call")

	local = local.Add(-time.Hour) // the local clock went back (a test's stub): read again
	_, err = c.now(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, reads)
}

// Callers that find the reading stale together share one read, and one
// whose context ends stops waiting without failing the others.
func TestDBClockSharesOneRead(t *testing.T) {
	db := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	release := make(chan struct{})
	var mu sync.Mutex
	reads := 0
	// A still local clock: a caller that comes late (a loaded machine) is
	// served the reading carried forward by zero, so every caller sees db
	// whether it joined the read in flight or found it fresh.
	local := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	c := dbClock{maxAge: time.Second, local: func() time.Time { return local },
		read: func(ctx context.Context) (time.Time, error) {
			mu.Lock()
			reads++
			mu.Unlock()
			<-release
			return db, ctx.Err()
		}}
	var wg sync.WaitGroup
	got := make([]time.Time, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = c.now(context.Background()) })
	}
	gone, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() {
		_, err := c.now(gone)
		cancelled <- err
	}()
	time.Sleep(20 * time.Millisecond) // let them all find the read in flight
	cancel()
	require.ErrorIs(t, <-cancelled, context.Canceled)
	close(release)
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		require.Equal(t, db, got[i])
	}
	require.Equal(t, 1, reads)
}
