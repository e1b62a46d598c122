package fuzz

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// Campaign runs many seeded sequences.
type Campaign struct {
	Factory Factory
	Options Options
	Gen     GenConfig
	// Seeds are run in order; results are merged in seed order whatever the
	// number of workers, so output is deterministic.
	Seeds   []uint64
	Steps   int
	Workers int
	// ShrinkBudget bounds the shrink of the first failure (0: ShrinkBudget).
	ShrinkBudget int
	// Progress, if set, is called after each seed with the count done.
	Progress func(done, total int)
	// Tokens, if set, is the form every offered commit token must have;
	// the campaign also checks that none is offered twice across its seeds.
	Tokens *TokenRule
}

// SeedFailure is a failing seed with its shrunk sequence.
type SeedFailure struct {
	Seed   uint64
	Result RunResult
	// Shrunk is set for the first failing seed only.
	Shrunk    *Sequence
	ShrunkRes *RunResult
}

// CampaignResult totals a campaign.
type CampaignResult struct {
	Seeds, Steps int
	Codes        map[string]int
	// Coverage sums every seed's coverage (see Coverage).
	Coverage Coverage
	Failures []SeedFailure
	// TokensChecked counts the offered commit tokens checked against
	// Campaign.Tokens; TokenProblems lists the first that broke it.
	TokensChecked int
	TokenProblems []TokenProblem
}

// Violations counts failures of kind violation; Divergences of kind divergence.
func (r CampaignResult) count(k FailureKind) int {
	n := 0
	for _, f := range r.Failures {
		if f.Result.Failure.Kind == k {
			n++
		}
	}
	return n
}

// Violations is the number of seeds that broke an invariant.
func (r CampaignResult) Violations() int { return r.count(FailureViolation) }

// Divergences is the number of seeds on which targets disagreed.
func (r CampaignResult) Divergences() int { return r.count(FailureDivergence) }

// Errors is the number of seeds that hit infrastructure trouble.
func (r CampaignResult) Errors() int { return r.count(FailureError) }

// SortedCodes lists the reply codes seen, sorted by name.
func (r CampaignResult) SortedCodes() []string {
	keys := make([]string, 0, len(r.Codes))
	for k := range r.Codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Run runs every seed and shrinks the first failure.
func (c Campaign) Run(ctx context.Context) (CampaignResult, error) {
	workers := max(c.Workers, 1)
	results := make([]RunResult, len(c.Seeds))
	errs := make([]error, len(c.Seeds))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(worker int) {
			defer wg.Done()
			opts := c.Options
			opts.Coverage = true
			for i := range next {
				seq, marks := generate(c.Seeds[i], c.Steps, c.Gen)
				results[i], errs[i] = Run(ctx, c.Factory, worker, seq, opts)
				if cov := results[i].Coverage; cov != nil {
					for _, m := range marks[:results[i].Steps] {
						if m != "" {
							cov.Faults[m]++
						}
					}
				}
				mu.Lock()
				done++
				if c.Progress != nil {
					c.Progress(done, len(c.Seeds))
				}
				mu.Unlock()
			}
		}(w)
	}
	for i := range c.Seeds {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return CampaignResult{}, err
	}
	out := CampaignResult{Seeds: len(c.Seeds), Codes: map[string]int{}, Coverage: NewCoverage()}
	for i, res := range results {
		if errs[i] != nil {
			return out, fmt.Errorf("seed %d: %w", c.Seeds[i], errs[i])
		}
		out.Steps += res.Steps
		if res.Coverage != nil {
			out.Coverage.Add(*res.Coverage)
		}
		for k, n := range res.Codes {
			out.Codes[k] += n
		}
		if res.Failure != nil {
			out.Failures = append(out.Failures, SeedFailure{Seed: c.Seeds[i], Result: res})
		}
	}
	if c.Tokens != nil {
		out.TokensChecked, out.TokenProblems = checkTokens(*c.Tokens, c.Seeds, results)
	}
	if len(out.Failures) > 0 {
		first := &out.Failures[0]
		budget := c.ShrinkBudget
		if budget == 0 {
			budget = ShrinkBudget
		}
		seq := Generate(first.Seed, c.Steps, c.Gen)
		shrunk, res, err := Shrink(ctx, c.Factory, seq, c.Options, first.Result, budget)
		if err != nil {
			return out, fmt.Errorf("shrink seed %d: %w", first.Seed, err)
		}
		first.Shrunk, first.ShrunkRes = &shrunk, &res
	}
	return out, nil
}
