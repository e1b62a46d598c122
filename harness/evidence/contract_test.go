package evidence

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestContractSection(t *testing.T) {
	t.Parallel()
	c := sampleCard(false)
	require.NotContains(t, renderMarkdown(t, c, WriteOptions{}), "## Contract tables", "no check, no section")
	c.Contract = []ContractCheck{
		{Table: "retryable failure codes", Source: "docs/SPEC.md:106", Contract: "`no_capacity`", Passed: true},
		{Table: "max_attempts bounds and default", Source: "docs/SPEC.md:65", Contract: "1..10, default 3",
			Detail: "protocol.MaxAttemptsMax is 11, the contract says 10"},
	}
	c.Campaigns[0].TokensChecked = 42
	md := renderMarkdown(t, c, WriteOptions{})
	require.Contains(t, md, "## Contract tables\n")
	require.Regexp(t, "\\| retryable failure codes +\\| `docs/SPEC.md:106` +\\| `no_capacity` +\\| PASS", md)
	require.Regexp(t, "\\| max_attempts bounds and default +\\| `docs/SPEC.md:65` +\\| 1..10, default 3 +\\| FAIL", md)
	require.Contains(t, md, "across the campaign: "+c.Campaigns[0].Name+" 42.")
	require.Less(t, strings.Index(md, "## Contract tables"), strings.Index(md, "## Campaigns"))

	var html bytes.Buffer
	require.NoError(t, WriteHTML(&html, c, WriteOptions{}))
	require.Contains(t, html.String(), "<h2>Contract tables</h2>")
	require.Contains(t, html.String(), "<code>docs/SPEC.md:65</code>")

	// A card may not say PASS with a table that disagrees.
	for i := range c.Campaigns {
		c.Campaigns[i].Passed = true
	}
	for i := range c.Scenarios {
		c.Scenarios[i].Passed = true
	}
	c.Passed, c.Failures = true, nil
	require.ErrorContains(t, WriteMarkdown(&bytes.Buffer{}, c, WriteOptions{}), `contract table "max_attempts bounds and default" disagrees`)
}
