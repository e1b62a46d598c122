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
