package fuzz

import (
	"context"
	"fmt"
)

// Nondeterminism is a seed whose two runs differed: the first step whose
// trace hash (replies and projected rows) is not the same.
type Nondeterminism struct {
	Seed uint64
	// Step is the first differing step; Event is the event at it.
	Step  int
	Event Event
	// First and Second are the two runs' hashes at Step ("" past the end of
	// a run that stopped early).
	First, Second string
}

func (n Nondeterminism) String() string {
	return fmt.Sprintf("seed %d: runs differ at step %d (%s): trace %q vs %q", n.Seed, n.Step, n.Event, n.First, n.Second)
}

// CheckDeterminism runs each seed's sequence twice on fresh targets with
// tracing on and returns every seed whose two traces differ (a seed must
// reproduce its run exactly, or a replay command means nothing).
func CheckDeterminism(ctx context.Context, f Factory, opts Options, gen GenConfig, seeds []uint64, steps int) ([]Nondeterminism, error) {
	opts.Trace = true
	var out []Nondeterminism
	for _, seed := range seeds {
		seq := Generate(seed, steps, gen)
		var traces [2][]string
		for i := range traces {
			res, err := Run(ctx, f, 0, seq, opts)
			if err != nil {
				return out, err
			}
			traces[i] = res.Trace
		}
		if n, ok := firstDifference(traces[0], traces[1]); ok {
			d := Nondeterminism{Seed: seed, Step: n}
			if n < len(seq.Events) {
				d.Event = seq.Events[n]
			}
			if n < len(traces[0]) {
				d.First = traces[0][n]
			}
			if n < len(traces[1]) {
				d.Second = traces[1][n]
			}
			out = append(out, d)
		}
	}
	return out, nil
}

func firstDifference(a, b []string) (int, bool) {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i, true
		}
	}
	return 0, false
}
