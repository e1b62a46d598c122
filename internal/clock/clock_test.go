package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStubFiresTimersWhenDue(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewStub(start)
	a := s.After(time.Second)
	b := s.After(3 * time.Second)
	require.Equal(t, 2, s.Waiters())
	s.Advance(2 * time.Second)
	require.Equal(t, start.Add(2*time.Second), <-a)
	select {
	case <-b:
		t.Fatal("timer fired early")
	default:
	}
	s.Advance(time.Second)
	require.Equal(t, start.Add(3*time.Second), <-b)
	require.Zero(t, s.Waiters())
	require.Equal(t, start.Add(3*time.Second), s.Now())
	require.Equal(t, s.Now(), <-s.After(0))
}

func TestStubAfterFuncRunsWhenDueUnlessStopped(t *testing.T) {
	t.Parallel()
	s := NewStub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fired := make(chan string, 3)
	s.AfterFunc(time.Second, func() { fired <- "a" })
	stopped := s.AfterFunc(time.Second, func() { fired <- "stopped" })
	s.AfterFunc(2*time.Second, func() { fired <- "b" })
	require.Equal(t, 3, s.Waiters())
	require.True(t, stopped.Stop())
	require.False(t, stopped.Stop(), "a second Stop finds nothing to stop")
	require.Equal(t, 2, s.Waiters())
	s.Advance(time.Second)
	require.Equal(t, "a", <-fired)
	require.Equal(t, 1, s.Waiters())
	s.Advance(time.Second)
	require.Equal(t, "b", <-fired)
	require.Zero(t, s.Waiters())
	select {
	case f := <-fired:
		t.Fatalf("%s ran after it was stopped or twice", f)
	case <-time.After(20 * time.Millisecond):
	}
	s.AfterFunc(0, func() { fired <- "now" })
	require.Equal(t, "now", <-fired)
}

func TestRealAfterFuncStops(t *testing.T) {
	t.Parallel()
	ran := make(chan struct{}, 1)
	tm := Real{}.AfterFunc(time.Hour, func() { ran <- struct{}{} })
	require.True(t, tm.Stop())
	Real{}.AfterFunc(time.Millisecond, func() { ran <- struct{}{} })
	<-ran
}

func TestOnlyAStubPinsDecisions(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 1500, time.FixedZone("x", 3600))
	_, pinned := Real{}.Pinned()
	require.False(t, pinned)
	require.True(t, PinnedNow(Real{}).IsZero())
	require.True(t, PinnedNow(nil).IsZero())
	s := NewStub(at)
	got, pinned := s.Pinned()
	require.True(t, pinned)
	require.Equal(t, at, got)
	stored := PinnedNow(s)
	require.Equal(t, time.UTC, stored.Location())
	require.Equal(t, at.Truncate(time.Microsecond).UnixNano(), stored.UnixNano())
	require.Equal(t, stored, Stored(at))
}
