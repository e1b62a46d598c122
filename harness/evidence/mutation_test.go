package evidence

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A mutation card shows its score and one row per mutant, round-trips
// through JSON, and is filed under its own name; a card without a score
// has no such section.
func TestMutationScoreSection(t *testing.T) {
	score := MutationScore{Gate: "rendermac qualify --seeds 1", Killed: 1, Total: 2, KilledByQualify: 1, Mutants: []Mutant{
		{ID: "budget-off-by-one", Kind: "off-by-one", File: "server/fencing/transitions.go", What: "one attempt too many",
			Outcome: "killed", KilledBy: []string{"scenario retry_budget_exhausted"}},
		{ID: "webhook-failure-not-retried", Kind: "webhook", File: "server/webhook/deliver.go", What: "never retried",
			Outcome: "survived"},
		{ID: "broken", Kind: "x", File: "x.go", Outcome: "invalid", Detail: "does not build"},
	}}
	c := Card{Title: "Source mutation campaign", Date: "2026-12-03", MutationScore: &score,
		Failures: []Failure{{Source: "mutant webhook-failure-not-retried", Detail: "survived", Replay: "rendermac mutate --only webhook-failure-not-retried"}}}
	var md bytes.Buffer
	require.NoError(t, WriteMarkdown(&md, c, WriteOptions{}))
	out := md.String()
	require.Contains(t, out, "## Mutation score")
	require.Contains(t, out, "Score: **1/2 killed (50.0%)**, 1 by the qualify gate alone.")
	require.Contains(t, out, "| budget-off-by-one ")
	require.Contains(t, out, "scenario retry_budget_exhausted")
	require.Regexp(t, `\| webhook-failure-not-retried +\| webhook +\| server/webhook/deliver.go +\| survived`, out)

	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, c, WriteOptions{}))
	back, err := ReadJSON(&js)
	require.NoError(t, err)
	require.Equal(t, score, *back.MutationScore)

	md1, _, _, _ := FileNames(c)
	require.Equal(t, "2026-12-03-mutation-score.md", md1)

	c.MutationScore = nil
	md.Reset()
	require.NoError(t, WriteMarkdown(&md, c, WriteOptions{}))
	require.False(t, strings.Contains(md.String(), "Mutation score"))
}

// The by-package table counts the catalogue per package and tells a kill
// by qualify from one by package tests only; invalid mutants do not count.
func TestMutationPackageRows(t *testing.T) {
	score := MutationScore{Mutants: []Mutant{
		{ID: "a", File: "server/fencing/lease.go", Outcome: "killed", KilledBy: []string{"model-vs-postgres seed 3"}},
		{ID: "b", File: "server/fencing/sweep.go", Outcome: "killed", KilledBy: []string{"test ./server/fencing/: TestSweep"}},
		{ID: "c", File: "server/api/pair.go", Outcome: "timeout", KilledBy: []string{"timeout"}},
		{ID: "d", File: "protocol/codes.go", Outcome: "survived"},
		{ID: "e", File: "protocol/codes.go", Outcome: "invalid"},
	}}
	header, rows := PackageRows(score)
	require.Equal(t, []string{"Package", "Mutants", "Killed", "By qualify alone"}, header)
	require.Equal(t, [][]string{{"protocol", "1", "0", "0"}, {"server/api", "1", "1", "0"}, {"server/fencing", "2", "2", "1"}}, rows)
	require.False(t, score.Mutants[1].ByQualify(), "a kill by package tests alone is not qualify's")
	require.False(t, score.Mutants[2].ByQualify(), "a timeout is no evidence that qualify catches the mutant")

	var md bytes.Buffer
	require.NoError(t, WriteMarkdown(&md, Card{Title: "Source mutation campaign", Date: "2026-12-05", MutationScore: &score}, WriteOptions{}))
	require.Regexp(t, `\| server/fencing +\| 2 +\| 2 +\| 1 +\|`, md.String())
}
