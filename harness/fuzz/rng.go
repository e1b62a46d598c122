package fuzz

import (
	"encoding/binary"
	"math/rand/v2"
)

// Ratio is a probability as an integer ratio, so that a seed draws the same
// outcome on every platform (no floating point in decisions).
type Ratio struct{ Num, Den uint64 }

// Rng is the single PRNG of a run. All randomness of the generator and of
// the identities handed to targets derives from one seed through it.
type Rng struct{ r *rand.Rand }

// NewRng seeds a PCG generator; the same seed gives the same stream.
func NewRng(seed uint64) *Rng {
	return &Rng{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Chance reports true with probability p.
func (g *Rng) Chance(p Ratio) bool { return g.r.Uint64N(p.Den) < p.Num }

// IntN draws uniformly from [0, n).
func (g *Rng) IntN(n int) int { return g.r.IntN(n) }

// Between draws uniformly from [lo, hi].
func (g *Rng) Between(lo, hi int) int { return lo + g.r.IntN(hi-lo+1) }

// Weighted draws an index with probability weights[i]/sum(weights).
func (g *Rng) Weighted(weights []int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := g.r.IntN(total)
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	panic("faults: weighted draw out of range")
}

// IDSource returns identities for a run: three ChaCha8 streams keyed by the
// seed, one per kind, so every target given IDSource(seed) draws the same ids
// and tokens in the same order.
func IDSource(seed uint64) RandomIDs {
	key := func(kind byte) *rand.ChaCha8 {
		var k [32]byte
		binary.LittleEndian.PutUint64(k[:], seed)
		k[31] = kind
		return rand.NewChaCha8(k)
	}
	return RandomIDs{Jobs: key(1), Attempts: key(2), Tokens: key(3)}
}
