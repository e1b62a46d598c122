package agent

import (
	"math/rand/v2"
	"time"
)

// backoff yields reconnect delays with full jitter: the n-th consecutive
// failure waits a uniform draw from [0, min(max, base*2^n)]. Full jitter
// spreads a fleet that lost the gateway at the same instant over the whole
// window instead of retrying in waves.
type backoff struct {
	base, max time.Duration
	rnd       *rand.Rand
	n         int
}

// next returns the delay before the next attempt and counts the failure.
func (b *backoff) next() time.Duration {
	ceil := b.max
	// Stop doubling once past max, so the shift can never overflow.
	if b.n < 62 && b.base<<b.n > 0 && b.base<<b.n < b.max {
		ceil = b.base << b.n
	}
	b.n++
	return time.Duration(b.rnd.Int64N(int64(ceil) + 1))
}

// reset forgets past failures, after a session that proved the path healthy.
func (b *backoff) reset() { b.n = 0 }
