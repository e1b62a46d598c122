package qualify

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/contract"
	"github.com/rendermac/rendermac/harness/evidence"
)

// A rule's checks are marked run or not, with why; a rule is proven only
// when each of its mutants was killed by qualify alone in the card.
func TestRuleSectionMarksWhatRanAndWhatIsProven(t *testing.T) {
	trace := []contract.RuleTrace{
		{Rule: contract.Rule{ID: "a.ran", File: "docs/SPEC.md", Line: 1}, Checks: []string{"scenario:happy_path"}, Mutants: []string{"m1"}},
		{Rule: contract.Rule{ID: "a.fleet", File: "docs/SPEC.md", Line: 2}, Checks: []string{"fleet:drain-bound"}, Mutants: []string{"m1", "m2"}},
		{Rule: contract.Rule{ID: "a.none", File: "docs/SPEC.md", Line: 3}},
	}
	card := evidence.Card{Scenarios: []evidence.Scenario{{Name: "happy_path"}}}
	c := Config{NoFleet: true}
	score := &evidence.MutationScore{Mutants: []evidence.Mutant{
		{ID: "m1", Outcome: "killed", KilledBy: []string{"scenario happy_path"}},
		{ID: "m2", Outcome: "killed", KilledBy: []string{"test ./x: TestX"}},
	}}
	sec := ruleSection(trace, newRanChecks(card, c, nil, nil), score, "card")
	require.Equal(t, 3, sec.Total)
	require.Equal(t, 1, sec.Checked)
	require.Equal(t, 1, sec.Proven, "a.fleet's m2 was killed by package tests only")
	require.True(t, sec.Rows[0].Checked())
	require.Equal(t, "fleet:drain-bound: --no-fleet", sec.Rows[1].NotCheckedWhy())
	require.Equal(t, "no check of qualify reaches it", sec.Rows[2].NotCheckedWhy())
	require.Len(t, sec.Unchecked(), 2)

	var md bytes.Buffer
	require.NoError(t, evidence.WriteMarkdown(&md, evidence.Card{Title: "Q", Date: "2026-12-07", Passed: true, Rules: sec}, evidence.WriteOptions{}))
	require.Contains(t, md.String(), "**Verdict: PASS (incomplete).**")
	require.Contains(t, md.String(), "- Not done: 2 of the contract's 3 rules were not checked by this run")
	require.Contains(t, md.String(), "| a.fleet | fleet:drain-bound: --no-fleet  |")
}
