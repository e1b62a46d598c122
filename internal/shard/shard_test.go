package shard

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseNamesWhatIsWrong(t *testing.T) {
	for in, want := range map[string]string{
		"0/2":                    "K must be between 1 and N=2",
		"3/2":                    "K must be between 1 and N=2",
		"1/0":                    "N must be at least 1",
		"x/y":                    "want K/N with whole numbers",
		"1/2/3":                  "want K/N",
		"-1/2":                   "want K/N",
		"":                       "want K/N",
		" 1/2":                   "want K/N",
		"1/20000":                "K and N must be at most 10000",
		"1/99999999999999999999": "K and N must be at most 10000",
	} {
		_, err := Parse(in)
		require.ErrorContains(t, err, want, "input %q", in)
	}
	s, err := Parse("2/3")
	require.NoError(t, err)
	require.Equal(t, Spec{K: 2, N: 3}, s)
	require.Equal(t, "2/3", s.String())
	require.Empty(t, Spec{}.String())
}

// The shards of any n are disjoint, contiguous, in K order, cover 0..n and
// differ in size by at most one.
func TestRangesPartitionInOrder(t *testing.T) {
	for n := 0; n <= 40; n++ {
		for parts := 1; parts <= 9; parts++ {
			next, smallest, largest := 0, n, 0
			for k := 1; k <= parts; k++ {
				lo, hi := Spec{K: k, N: parts}.Range(n)
				require.Equal(t, next, lo, "n=%d shard %d/%d starts where the previous ended", n, k, parts)
				require.LessOrEqual(t, lo, hi)
				smallest, largest = min(smallest, hi-lo), max(largest, hi-lo)
				next = hi
			}
			require.Equal(t, n, next, "n=%d, %d shards cover everything", n, parts)
			require.LessOrEqual(t, largest-smallest, 1)
		}
	}
	lo, hi := Spec{}.Range(7)
	require.Equal(t, [2]int{0, 7}, [2]int{lo, hi})
}
