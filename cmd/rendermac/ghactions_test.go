package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/evidence"
)

// Under GitHub Actions a failing card becomes one ::error annotation per
// failure with its replay command, and its Markdown is appended to the
// step summary; outside Actions nothing is printed or written.
func TestGitHubActionsAnnotationsAndSummary(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "card.md")
	require.NoError(t, os.WriteFile(md, []byte("# Phase-fault qualification\nFAIL\n"), 0o644))
	summary := filepath.Join(dir, "summary.md")
	require.NoError(t, os.WriteFile(summary, []byte("earlier step\n"), 0o644))
	card := evidence.Card{Failures: []evidence.Failure{
		{Source: "model", Seed: 3, Detail: "divergence at step 62: 50% off", Replay: "go run ./cmd/rendermac fuzz --seed 3"},
		{Source: "scenario lease_expiry, slow", Detail: "line one\nline two", Replay: "go run -tags faultpoints ./cmd/rendermac scenarios --run lease_expiry"},
	}}
	env := map[string]string{"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": summary}
	var out bytes.Buffer
	require.NoError(t, githubActions(card, []string{filepath.Join(dir, "card.json"), md}, func(k string) string { return env[k] }, &out))
	require.Equal(t,
		"::error title=model seed 3::divergence at step 62: 50%25 off%0Areplay: go run ./cmd/rendermac fuzz --seed 3\n"+
			"::error title=scenario lease_expiry%2C slow::line one%0Aline two%0Areplay: go run -tags faultpoints ./cmd/rendermac scenarios --run lease_expiry\n",
		out.String())
	got, err := os.ReadFile(summary)
	require.NoError(t, err)
	require.Equal(t, "earlier step\n# Phase-fault qualification\nFAIL\n\n", string(got), "appended, not replaced")

	out.Reset()
	env["GITHUB_ACTIONS"] = ""
	require.NoError(t, githubActions(card, []string{md}, func(k string) string { return env[k] }, &out))
	require.Empty(t, out.String())
	got, err = os.ReadFile(summary)
	require.NoError(t, err)
	require.Equal(t, "earlier step\n# Phase-fault qualification\nFAIL\n\n", string(got), "untouched outside Actions")
}
