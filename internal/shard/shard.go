package shard

import (
	"fmt"
	"regexp"
	"strconv"
)

// Spec is one shard, K of N (1 <= K <= N). The zero Spec is the whole,
// unsharded run.
type Spec struct {
	K, N int
}

// maxShards bounds N: a larger matrix is a typo, and the bound keeps K*n
// in Range far from overflowing.
const maxShards = 10000

var form = regexp.MustCompile(`^([0-9]+)/([0-9]+)$`)

// Parse reads "K/N", naming what is wrong with anything else.
func Parse(s string) (Spec, error) {
	m := form.FindStringSubmatch(s)
	if m == nil {
		return Spec{}, fmt.Errorf("shard %q: want K/N with whole numbers, e.g. 1/4 (the first of four shards)", s)
	}
	k, errK := strconv.Atoi(m[1])
	n, errN := strconv.Atoi(m[2])
	switch {
	case errK != nil || errN != nil || n > maxShards:
		return Spec{}, fmt.Errorf("shard %q: K and N must be at most %d", s, maxShards)
	case n < 1:
		return Spec{}, fmt.Errorf("shard %q: N must be at least 1", s)
	case k < 1 || k > n:
		return Spec{}, fmt.Errorf("shard %q: K must be between 1 and N=%d", s, n)
	}
	return Spec{K: k, N: n}, nil
}

// Sharded reports whether s is a shard rather than the whole run.
func (s Spec) Sharded() bool { return s.N > 0 }

// String is "K/N", or "" for the whole run.
func (s Spec) String() string {
	if !s.Sharded() {
		return ""
	}
	return strconv.Itoa(s.K) + "/" + strconv.Itoa(s.N)
}

// Set parses a flag value, so a Spec can be a flag.Value.
func (s *Spec) Set(v string) error {
	p, err := Parse(v)
	if err != nil {
		return err
	}
	*s = p
	return nil
}

// Range is the slice [lo, hi) of n items that shard s runs: contiguous, so
// that the shards' results concatenated in K order are in the unsharded
// order; disjoint, and together covering 0..n, with sizes differing by at
// most one. The whole run's range is [0, n).
func (s Spec) Range(n int) (lo, hi int) {
	if !s.Sharded() {
		return 0, n
	}
	return (s.K - 1) * n / s.N, s.K * n / s.N
}
