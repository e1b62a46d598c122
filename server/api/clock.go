package api

import (
	"context"
	"sync"
	"time"
)

// dbClockMaxAge bounds how long one reading of the database clock is
// carried forward (dbClock).
const dbClockMaxAge = time.Second

// dbClock is the database's clock as this process last read it, carried
// forward on this process's monotonic clock for at most maxAge. The API's
// own expiry decisions (grants) would otherwise cost a round trip each, one
// per artifact GET or PUT, so at least one per job. An estimate lags the
// database's now() by at most the read's round trip (a reading is dated
// when the read began) plus the local clock's drift over maxAge: micro- to
// milliseconds, against grants that live an hour. A failed read is returned
// and the next call reads again.
type dbClock struct {
	read   func(context.Context) (time.Time, error)
	local  func() time.Time // time.Now in production: its monotonic reading carries the estimate
	maxAge time.Duration

	mu    sync.Mutex
	db    time.Time // the last reading
	at    time.Time // the local instant its read began
	valid bool
}

func (c *dbClock) now(ctx context.Context) (time.Time, error) {
	start := c.local()
	c.mu.Lock()
	if age := start.Sub(c.at); c.valid && age >= 0 && age < c.maxAge {
		t := c.db.Add(age)
		c.mu.Unlock()
		return t.UTC().Truncate(time.Microsecond), nil
	}
	c.mu.Unlock()
	db, err := c.read(ctx)
	if err != nil {
		return time.Time{}, err
	}
	db = db.UTC()
	c.mu.Lock()
	if !c.valid || start.After(c.at) { // a slower concurrent read must not set it back
		c.db, c.at, c.valid = db, start, true
	}
	c.mu.Unlock()
	return db, nil
}
