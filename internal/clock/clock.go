// Package clock is the time source that logic takes as a parameter. The
// control plane's decisions use the database clock (or a pinned instant in
// the harness); Clock serves what runs outside a transaction: timers for
// heartbeats, backoff and lease renewals.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After wraps time.After.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Stub is a manual clock for tests: time moves only when Advance is called,
// and timers fire when the stub's time reaches their deadline.
type Stub struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewStub returns a stub clock set to t.
func NewStub(t time.Time) *Stub { return &Stub{now: t} }

// Now returns the stub's time.
func (s *Stub) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// After returns a channel that fires once the stub has been advanced by d.
func (s *Stub) After(d time.Duration) <-chan time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- s.now
		return ch
	}
	s.waiters = append(s.waiters, waiter{at: s.now.Add(d), ch: ch})
	return ch
}

// Advance moves the stub forward and fires every timer now due.
func (s *Stub) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
	kept := s.waiters[:0]
	for _, w := range s.waiters {
		if !w.at.After(s.now) {
			w.ch <- s.now
			continue
		}
		kept = append(kept, w)
	}
	s.waiters = kept
}

// Waiters reports how many timers are pending, so a test can wait until the
// code under test is blocked on the clock instead of sleeping.
func (s *Stub) Waiters() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters)
}
