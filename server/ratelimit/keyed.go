package ratelimit

import (
	"container/list"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/rendermac/rendermac/internal/clock"
)

// DefaultMaxKeys bounds the keys one Keyed remembers.
const DefaultMaxKeys = 100_000

// Keyed is a token bucket per key under one Rule. It is safe for
// concurrent use.
type Keyed struct {
	rule    Rule
	clock   clock.Clock
	maxKeys int

	mu   sync.Mutex
	keys map[string]*list.Element // of *bucket
	lru  list.List                // front: most recently used
	// forgotten counts busy keys dropped because the table was full.
	forgotten int64
}

type bucket struct {
	key string
	lim *rate.Limiter
}

// New returns a limiter of rule that judges at c.Now() (nil: the wall
// clock) and remembers at most maxKeys keys (<= 0: DefaultMaxKeys).
func New(rule Rule, c clock.Clock, maxKeys int) *Keyed {
	if c == nil {
		c = clock.Real{}
	}
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	return &Keyed{rule: rule, clock: c, maxKeys: maxKeys, keys: map[string]*list.Element{}}
}

// Rule returns the limiter's rule.
func (k *Keyed) Rule() Rule { return k.rule }

// Allow takes one event for key. It reports false, and how long until the
// next event would be allowed, when the key's bucket is empty; a refused
// event takes nothing, so a client that waits retryAfter gets through.
func (k *Keyed) Allow(key string) (ok bool, retryAfter time.Duration) {
	if k == nil || k.rule.IsOff() {
		return true, 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.clock.Now()
	r := k.bucket(key, now).ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, ceilMillis(d)
	}
	return true, 0
}

// Check reports, without taking an event, whether key has one left and if
// not how long until it will. It pairs with Allow for limits that count
// only failures: check before the attempt, take on failure.
func (k *Keyed) Check(key string) (ok bool, retryAfter time.Duration) {
	if k == nil || k.rule.IsOff() {
		return true, 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	el, found := k.keys[key]
	if !found {
		return true, 0
	}
	now := k.clock.Now()
	tokens := el.Value.(*bucket).lim.TokensAt(now)
	if tokens >= 1 {
		return true, 0
	}
	return false, ceilMillis(time.Duration(math.Ceil((1 - tokens) * float64(k.rule.Every()))))
}

// Len is the number of keys remembered.
func (k *Keyed) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.keys)
}

// Forgotten is how many busy keys were dropped because the table was full.
func (k *Keyed) Forgotten() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.forgotten
}

// bucket returns key's limiter, creating it (and making room) if needed.
// k.mu is held.
func (k *Keyed) bucket(key string, now time.Time) *rate.Limiter {
	if el, ok := k.keys[key]; ok {
		k.lru.MoveToFront(el)
		return el.Value.(*bucket).lim
	}
	k.evictIdle(now)
	for len(k.keys) >= k.maxKeys {
		k.drop(k.lru.Back())
		k.forgotten++
	}
	lim := rate.NewLimiter(rate.Every(k.rule.Every()), k.rule.N)
	k.keys[key] = k.lru.PushFront(&bucket{key: key, lim: lim})
	return lim
}

// evictIdle drops least recently used keys whose bucket is full again:
// a fresh bucket would answer exactly as they do. Each key is dropped at
// most once, so the cost is amortised over the inserts.
func (k *Keyed) evictIdle(now time.Time) {
	for el := k.lru.Back(); el != nil; el = k.lru.Back() {
		if el.Value.(*bucket).lim.TokensAt(now) < float64(k.rule.N) {
			return
		}
		k.drop(el)
	}
}

func (k *Keyed) drop(el *list.Element) {
	delete(k.keys, el.Value.(*bucket).key)
	k.lru.Remove(el)
}

// ceilMillis rounds d up to a millisecond, hiding the float drift of the
// bucket arithmetic (999.999999ms is a second).
func ceilMillis(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// RetryAfterSeconds is d as the whole seconds of a Retry-After header,
// rounded up and at least 1, so that a client that waits it is let in.
func RetryAfterSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
