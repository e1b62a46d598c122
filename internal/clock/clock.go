package clock

import (
	"sync"
	"time"
)

// Clock tells the time, makes timers and says whether it pins decisions.
type Clock interface {
	Now() time.Time
	// Pinned reports whether the control plane's decisions take this
	// clock's time (true, with that time) or the database's now() (false).
	Pinned() (time.Time, bool)
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless the
	// returned Timer is stopped first. Unlike a goroutine waiting on After,
	// nothing runs until then.
	AfterFunc(d time.Duration, f func()) Timer
}

// Stored is t in the form every row stores and every decision compares:
// UTC, whole microseconds (Postgres's timestamptz resolution).
func Stored(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// PinnedNow is the instant a decision is handed: c's pinned time in stored
// form, or the zero time, which the control plane reads as "the database's
// now()". A nil c is the database's clock too.
func PinnedNow(c Clock) time.Time {
	if c == nil {
		return time.Time{}
	}
	if t, ok := c.Pinned(); ok {
		return Stored(t)
	}
	return time.Time{}
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it
	// did so.
	Stop() bool
}

// Real is the wall clock. It does not pin decisions: those take the
// database's clock, the single authority, so processes with skewed wall
// clocks agree.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Pinned reports false: the database's clock decides.
func (Real) Pinned() (time.Time, bool) { return time.Time{}, false }

// After wraps time.After.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Stub is a manual clock for tests and the harness: time moves only when
// Advance is called, timers fire when the stub's time reaches their
// deadline, and it pins decisions to its time.
type Stub struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time // After's, or nil
	f  func()         // AfterFunc's, or nil
}

// NewStub returns a stub clock set to t.
func NewStub(t time.Time) *Stub { return &Stub{now: t} }

// Now returns the stub's time.
func (s *Stub) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Pinned reports the stub's time: every decision is taken at it.
func (s *Stub) Pinned() (time.Time, bool) { return s.Now(), true }

// After returns a channel that fires once the stub has been advanced by d.
func (s *Stub) After(d time.Duration) <-chan time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- s.now
		return ch
	}
	s.waiters = append(s.waiters, &waiter{at: s.now.Add(d), ch: ch})
	return ch
}

// AfterFunc calls f in its own goroutine once the stub has been advanced
// by d (at once when d <= 0).
func (s *Stub) AfterFunc(d time.Duration, f func()) Timer {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &waiter{at: s.now.Add(d), f: f}
	if d <= 0 {
		go f()
		return stubTimer{}
	}
	s.waiters = append(s.waiters, w)
	return stubTimer{s: s, w: w}
}

// stubTimer is one pending AfterFunc call of a Stub (none when s is nil).
type stubTimer struct {
	s *Stub
	w *waiter
}

// Stop removes the call from the stub's timers if it is still there.
func (t stubTimer) Stop() bool {
	if t.s == nil {
		return false
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for i, w := range t.s.waiters {
		if w == t.w {
			t.s.waiters = append(t.s.waiters[:i], t.s.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// Advance moves the stub forward and fires every timer now due.
func (s *Stub) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
	kept := s.waiters[:0]
	for _, w := range s.waiters {
		if !w.at.After(s.now) {
			if w.f != nil {
				go w.f()
			} else {
				w.ch <- s.now
			}
			continue
		}
		kept = append(kept, w)
	}
	clear(s.waiters[len(kept):])
	s.waiters = kept
}

// Waiters reports how many timers are pending, so a test can wait until the
// code under test is blocked on the clock instead of sleeping.
func (s *Stub) Waiters() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters)
}
