package api

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/rendermac/rendermac/internal/clock"
)

// dbClockMaxAge bounds how long one reading of the database clock is
// carried forward (dbClock).
const dbClockMaxAge = time.Second

// dbClockReadTimeout bounds one shared read of the database clock.
const dbClockReadTimeout = 10 * time.Second

// dbClock is the database's clock as this process last read it, carried
// forward on this process's monotonic clock for at most maxAge. The API's
// own expiry decisions (grants) would otherwise cost a round trip each, one
// per artifact GET or PUT, so at least one per job. An estimate lags the
// database's now() by at most the read's round trip (a reading is dated
// when the read began) plus the local clock's drift over maxAge: micro- to
// milliseconds, against grants that live an hour. Callers that find the
// reading stale together share one read. A failed read is returned and the
// next call reads again.
type dbClock struct {
	read   func(context.Context) (time.Time, error)
	local  func() time.Time // time.Now in production: its monotonic reading carries the estimate
	maxAge time.Duration

	reads singleflight.Group

	mu sync.Mutex
	db time.Time // the last reading, UTC
	at time.Time // the local instant its read began; zero: no reading yet
}

func (c *dbClock) now(ctx context.Context) (time.Time, error) {
	if t, ok := c.carried(c.local()); ok {
		return t, nil
	}
	// One read for every caller that finds the reading stale at once; each
	// waits only as long as its own context allows, and the read is bounded
	// by dbClockReadTimeout, not by whichever caller started it.
	ch := c.reads.DoChan("now", func() (any, error) {
		start := c.local()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dbClockReadTimeout)
		defer cancel()
		db, err := c.read(rctx)
		if err != nil {
			return time.Time{}, err
		}
		// singleflight runs one read at a time, so this reading is the
		// newest.
		db = db.UTC()
		c.mu.Lock()
		c.db, c.at = db, start
		c.mu.Unlock()
		return db, nil
	})
	select {
	case r := <-ch:
		return r.Val.(time.Time), r.Err
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// carried is the last reading carried forward to local instant at, if it
// is younger than maxAge.
func (c *dbClock) carried(at time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if age := at.Sub(c.at); !c.at.IsZero() && age >= 0 && age < c.maxAge {
		return clock.Stored(c.db.Add(age)), true
	}
	return time.Time{}, false
}
