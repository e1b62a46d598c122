package fuzz

import (
	"fmt"
	"strings"
)

// TokenRule is the form every commit token a target offers must have. The
// caller reads it from the contract's text (package contract), not from
// protocol: a wrong token generator is shared by the model and the server,
// so no comparison between them can catch it.
type TokenRule struct {
	Len      int
	Alphabet string
}

// Offer is a commit token a run's reference target offered (its replies
// are compared with every other target's, tokens included), at a step.
type Offer struct {
	Step  int
	Token string
}

// TokenProblem is an offered token that breaks the rule, or a token offered
// twice in one campaign (Seed and Step, and the first offer in First*).
type TokenProblem struct {
	Seed      uint64
	Step      int
	Detail    string
	Repeat    bool
	FirstSeed uint64
	FirstStep int
}

// maxTokenProblems bounds what a campaign reports: the first few say it.
const maxTokenProblems = 5

// checkTokens checks every offer of the campaign's runs (results in seed
// order) against rule, and that no token was offered twice across the
// whole campaign. It returns how many tokens it checked.
func checkTokens(rule TokenRule, seeds []uint64, results []RunResult) (int, []TokenProblem) {
	type at struct {
		seed uint64
		step int
	}
	seen := map[string]at{}
	var out []TokenProblem
	n := 0
	for i, res := range results {
		for _, o := range res.Offers {
			n++
			if d := rule.problem(o.Token); d != "" {
				out = append(out, TokenProblem{Seed: seeds[i], Step: o.Step, Detail: d})
			} else if first, dup := seen[o.Token]; dup {
				out = append(out, TokenProblem{Seed: seeds[i], Step: o.Step, Repeat: true, FirstSeed: first.seed, FirstStep: first.step,
					Detail: fmt.Sprintf("commit token offered twice in one campaign: first at seed %d step %d", first.seed, first.step)})
			} else {
				seen[o.Token] = at{seeds[i], o.Step}
			}
		}
	}
	return n, out[:min(len(out), maxTokenProblems)]
}

// problem says how tok breaks the rule, or "".
func (r TokenRule) problem(tok string) string {
	if len(tok) != r.Len {
		return fmt.Sprintf("commit token %q has %d characters, the contract's form has %d", tok, len(tok), r.Len)
	}
	if i := strings.IndexFunc(tok, func(c rune) bool { return !strings.ContainsRune(r.Alphabet, c) }); i >= 0 {
		return fmt.Sprintf("commit token %q has %q at %d, outside the contract's alphabet", tok, tok[i], i)
	}
	return ""
}
