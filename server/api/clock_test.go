package api

import (
	"context"
	"errors"
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
