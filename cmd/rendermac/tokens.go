package main

import (
	"fmt"

	"github.com/rendermac/rendermac/docs"
	"github.com/rendermac/rendermac/harness/contract"
	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/harness/fuzz"
)

// tokenRule is the form the contract's text gives offered commit tokens,
// which campaigns check every offer against; nil when the text cannot be
// read (the contract check on the card reports that).
func tokenRule() *fuzz.TokenRule {
	n, alphabet, err := contract.TokenForm(docs.SPEC)
	if err != nil {
		return nil
	}
	return &fuzz.TokenRule{Len: n, Alphabet: alphabet}
}

// tokenFailures turns a campaign's token problems into card failures: a
// token of the wrong form replays with its seed, a token offered twice with
// the seeds from the first offer's to the second's.
func tokenFailures(source string, f fuzzFlags, problems []fuzz.TokenProblem) []evidence.Failure {
	var out []evidence.Failure
	for _, p := range problems {
		replay := fuzzCommand(f, fmt.Sprintf("--seed %d --steps %d", p.Seed, f.steps))
		if p.Repeat {
			replay = fuzzCommand(f, fmt.Sprintf("--first-seed %d --seeds %d --steps %d", p.FirstSeed, p.Seed-p.FirstSeed+1, f.steps))
		}
		out = append(out, evidence.Failure{Source: source, Seed: p.Seed, Target: f.target, Variant: f.variant,
			Detail: fmt.Sprintf("step %d: %s", p.Step, p.Detail), Replay: replay})
	}
	return out
}
