package ratelimit

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/clock"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestParseRule(t *testing.T) {
	t.Parallel()
	r, err := ParseRule("10/1m")
	require.NoError(t, err)
	require.Equal(t, Rule{N: 10, Per: time.Minute}, r)
	require.Equal(t, 6*time.Second, r.Every())
	require.Equal(t, "10/1m0s", r.String())
	off, err := ParseRule("off")
	require.NoError(t, err)
	require.True(t, off.IsOff())
	for _, bad := range []string{"", "10", "0/1m", "-1/1m", "x/1m", "10/0s", "10/x", "2/1ns"} {
		_, err := ParseRule(bad)
		require.Error(t, err, bad)
	}
}

// A key gets its burst, is then refused with the wait until its next
// token, and is let in again once that wait has passed; other keys are
// untouched meanwhile.
func TestKeyedBurstRetryAfterRecovery(t *testing.T) {
	t.Parallel()
	c := clock.NewStub(t0)
	k := New(Rule{N: 3, Per: 30 * time.Second}, c, 0)
	for i := range 3 {
		ok, _ := k.Allow("a")
		require.True(t, ok, "event %d within the burst", i)
	}
	ok, wait := k.Allow("a")
	require.False(t, ok)
	require.Equal(t, 10*time.Second, wait)
	ok, wait = k.Check("a")
	require.False(t, ok)
	require.Equal(t, 10*time.Second, wait)

	ok, _ = k.Allow("b")
	require.True(t, ok, "another key has its own bucket")

	c.Advance(9 * time.Second)
	ok, wait = k.Allow("a")
	require.False(t, ok, "a refused event took nothing, and 9s refill less than one token")
	require.Equal(t, time.Second, wait)
	c.Advance(time.Second)
	ok, _ = k.Allow("a")
	require.True(t, ok, "after Retry-After the key is let in")
	ok, _ = k.Allow("a")
	require.False(t, ok)
}

func TestKeyedCheckTakesNothing(t *testing.T) {
	t.Parallel()
	k := New(Rule{N: 1, Per: time.Minute}, clock.NewStub(t0), 0)
	for range 5 {
		ok, _ := k.Check("a")
		require.True(t, ok)
	}
	ok, _ := k.Allow("a")
	require.True(t, ok)
	ok, wait := k.Check("a")
	require.False(t, ok)
	require.Equal(t, time.Minute, wait)
}

func TestKeyedOffNeverRefuses(t *testing.T) {
	t.Parallel()
	k := New(Off, clock.NewStub(t0), 1)
	for range 100 {
		ok, _ := k.Allow("a")
		require.True(t, ok)
	}
	var nilK *Keyed
	ok, _ := nilK.Allow("a")
	require.True(t, ok)
	require.Zero(t, k.Len())
}

// The table stays within maxKeys: idle keys (full buckets) are dropped
// first and without loss; busy keys only when every key is busy.
func TestKeyedBoundedMemory(t *testing.T) {
	t.Parallel()
	c := clock.NewStub(t0)
	k := New(Rule{N: 2, Per: time.Minute}, c, 10)
	for i := range 1000 {
		k.Allow("ip" + strconv.Itoa(i))
		require.LessOrEqual(t, k.Len(), 10)
	}
	require.Equal(t, int64(990), k.Forgotten(), "every key was busy (one token left), so each insert past 10 forgot one")

	c.Advance(time.Minute) // every bucket is full again
	k.Allow("fresh")
	require.Equal(t, 1, k.Len(), "idle keys are evicted on the next insert")
	require.Equal(t, int64(990), k.Forgotten(), "evicting idle keys forgets nothing")

	// A busy key survives inserts of others as long as there is room.
	k.Allow("busy")
	k.Allow("busy")
	for i := range 8 {
		k.Allow("other" + strconv.Itoa(i))
	}
	ok, _ := k.Allow("busy")
	require.False(t, ok, "busy key still remembered")
}

func TestIPKey(t *testing.T) {
	t.Parallel()
	require.Equal(t, "192.0.2.7", IPKey("192.0.2.7:5555"))
	require.Equal(t, "192.0.2.7", IPKey("[::ffff:192.0.2.7]:5555"))
	require.Equal(t, "2001:db8:1:2::/64", IPKey("[2001:db8:1:2:aaaa::1]:443"))
	require.Equal(t, IPKey("[2001:db8:1:2::9]:1"), IPKey("[2001:db8:1:2:ffff::1]:2"))
	require.NotEqual(t, IPKey("[2001:db8:1:2::9]:1"), IPKey("[2001:db8:1:3::9]:1"))
	require.Equal(t, "not-an-addr", IPKey("not-an-addr"))
}
