package contract

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRulesAreFoundWithTheirStatements(t *testing.T) {
	spec := "# Title\n\n## 5. Wire\n\nA missing token is refused before the upgrade [R:wire.auth-before-upgrade]. " +
		"Frames are JSON [R:wire.json]\nover text frames.\n\n- a list item that\n  says one thing [R:wire.item]\n\n" +
		"```\nnot a rule [R:wire.in-fence]\n```\n\nThe form is `[R:area.name]`, not a rule.\n"
	sem := "## Sweep\n\n| a | b [R:sweep.row] |\n"
	rules, err := ParseRules(spec, sem)
	require.NoError(t, err)
	require.Len(t, rules, 4)
	require.Equal(t, Rule{ID: "wire.auth-before-upgrade", File: "docs/SPEC.md", Line: 5, Section: "5. Wire",
		Text: "A missing token is refused before the upgrade"}, rules[0])
	require.Equal(t, "Frames are JSON", rules[1].Text)
	require.Equal(t, "a list item that says one thing", rules[2].Text)
	require.Equal(t, Rule{ID: "sweep.row", File: "docs/semantics.md", Line: 3, Section: "Sweep", Text: "a | b"}, rules[3])
}

func TestRepeatedAndMalformedRuleIDsAreRefused(t *testing.T) {
	_, err := ParseRules("one [R:a.b]\n\ntwo [R:a.b]\n", "three [R:a.b] four [R:Bad]\n")
	require.Error(t, err)
	require.Contains(t, err.Error(), "docs/SPEC.md:3: rule a.b is given twice (first at docs/SPEC.md:1)")
	require.Contains(t, err.Error(), "docs/semantics.md:1: rule a.b is given twice (first at docs/SPEC.md:1)")
	require.Contains(t, err.Error(), "docs/semantics.md:1: rule anchor [R:Bad] is not of the form")
}

// The embedded contract parses: no repeated or malformed anchor.
func TestTheContractsRulesParse(t *testing.T) {
	rules, err := Rules()
	require.NoError(t, err)
	for _, r := range rules {
		require.NotEmpty(t, r.Text, "rule %s at %s states nothing before its anchor", r.ID, r.Cite())
	}
}
