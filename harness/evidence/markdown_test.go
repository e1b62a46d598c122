package evidence

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func renderMarkdown(t *testing.T, c Card, o WriteOptions) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteMarkdown(&buf, c, o))
	return buf.String()
}

func TestMarkdownSectionsAndRows(t *testing.T) {
	t.Parallel()
	md := renderMarkdown(t, sampleCard(false), WriteOptions{})
	for _, want := range []string{
		"# Phase-fault qualification 2025-12-02: FAIL\n",
		"**Verdict: FAIL.** 2 campaigns, 2 scenarios, 2 invariants checked, 2 failures.",
		"## What was run\n",
		"- Commit: `65d0d78`\n",
		"- Go version: go1.26.0\n",
		"- Postgres version: 17.2\n",
		"- Postgres kind: docker\n",
		"- Host: ci-mac-01\n",
		"- Command: `rendermac qualify --seed 42 --seeds 200`\n",
		"- First seed: 42\n",
		"- Run time: 1m2s\n",
		"## Campaigns\n",
		"| Name              | Target | Seeds | Steps/sequence | Steps | Divergences | Violations | Errors | Verdict | Duration |",
		"| model-vs-postgres | both   |   200 |             60 | 12000 |           0 |          0 |      0 | PASS    | 41.5s    |",
		"| full-stack        | stack  |    20 |             40 |   800 |           1 |          0 |      0 | FAIL    | 850ms    |",
		"### Reply codes: model-vs-postgres\n",
		"| COMMITTED        |   412 |",
		"## Scenarios\n",
		"| sweep-clock-jump        | clock jump +2h   | sweep: before slot release      | attempt expired, slot freed | slot leaked    | FAIL    | 900ms    |",
		"## Invariants checked\n\n1. At most one attempt per job commits.\n2. A device holds at most one lease per slot.\n",
		"## Failures\n",
		"### 1. full-stack seed 257\n\nstep 17: model NOT_LEASE_HOLDER, stack COMMITTED\n\nReplay:\n\n```sh\nrendermac fuzz --target stack --seed 257 --steps 40\n```\n",
		"### 2. sweep-clock-jump\n",
		"## Not covered by this run\n\n- Real FFmpeg encodes\n- macOS sleep and wake\n",
	} {
		require.Contains(t, md, want)
	}
	// Sections come in the order a release manager reads them.
	order := []string{"## What was run", "## Campaigns", "## Scenarios", "## Invariants checked", "## Failures", "## Not covered by this run"}
	last := -1
	for _, h := range order {
		i := strings.Index(md, h)
		require.Greater(t, i, last, "section %q out of order", h)
		last = i
	}
}

func TestMarkdownRepliesSortedByCode(t *testing.T) {
	t.Parallel()
	md := renderMarkdown(t, sampleCard(true), WriteOptions{})
	last := -1
	for _, code := range sampleCodes {
		i := strings.Index(md, "| "+code+" ")
		require.Greater(t, i, last, "code %s out of order", code)
		last = i
	}
}

func TestMarkdownDeterministic(t *testing.T) {
	t.Parallel()
	for _, o := range []WriteOptions{{}, {NoTimings: true}} {
		first := renderMarkdown(t, sampleCard(false), o)
		require.Equal(t, first, renderMarkdown(t, sampleCard(false), o), "same card twice")
		require.Equal(t, first, renderMarkdown(t, sampleCard(true), o), "replies built in another order")
	}
}

func TestMarkdownEmptySections(t *testing.T) {
	t.Parallel()
	md := renderMarkdown(t, Card{Date: "2025-12-02", Passed: true}, WriteOptions{})
	// A card that cannot name its commit is not a plain PASS.
	require.Contains(t, md, "# Phase-fault qualification 2025-12-02: PASS (incomplete)\n")
	require.Contains(t, md, "- Not done: the commit is unknown")
	require.Contains(t, md, "## Failures\n\nNone.\n")
	require.Contains(t, md, "- Commit: (not recorded)\n")
}

// A PASS reads plain only when the run left nothing out; every gap is
// named in the summary at the top.
func TestVerdictOwnsUpToGaps(t *testing.T) {
	t.Parallel()
	c := Card{Date: "2025-12-02", Passed: true}
	c.Run.Commit = "0123456789abcdef0123456789abcdef01234567"
	require.Equal(t, VerdictPass, c.Verdict())
	require.Empty(t, c.Gaps())
	c.NotCovered = []string{SkippedNote("agent_restart", errors.New("needs -tags faultpoints"))}
	c.Campaigns = []Campaign{{Name: "model", Sequences: 3, Coverage: &Coverage{}}}
	c.Rules = &Rules{Total: 1, Rows: []RuleRow{{ID: "a.b", Checks: []RuleCheck{{Name: "fleet:x", Why: "--no-fleet"}}}}}
	require.Equal(t, VerdictIncomplete, c.Verdict())
	require.Equal(t, []string{
		`1 scenarios were not run (agent_restart): see "Not covered by this run"`,
		`1 of the contract's 1 rules were not checked by this run: see "Rules"`,
		"the coverage gate was off (--no-coverage-gate) for model",
	}, c.Gaps())
	c.Passed = false
	require.Equal(t, VerdictFail, c.Verdict())
	md := renderMarkdown(t, c, WriteOptions{})
	require.Contains(t, md, "- Not done: 1 scenarios were not run (agent_restart)")
}

func TestMarkdownCellsStayInTheirColumns(t *testing.T) {
	t.Parallel()
	c := sampleCard(false)
	c.Scenarios[0].Observed = "a | b\nc"
	md := renderMarkdown(t, c, WriteOptions{})
	require.Contains(t, md, `| a \| b c `)
}

func TestMarkdownNoTimings(t *testing.T) {
	t.Parallel()
	timed := renderMarkdown(t, sampleCard(false), WriteOptions{})
	require.Len(t, durationText.FindAllString(timed, -1), 5, "the pattern finds every duration when they are on")
	md := renderMarkdown(t, sampleCard(false), WriteOptions{NoTimings: true})
	require.NotContains(t, md, "Duration")
	require.NotContains(t, md, "Run time")
	require.Empty(t, durationText.FindAllString(md, -1))
	require.Contains(t, md, "Timings are omitted")
}

// TestMarkdownGolden pins the whole deterministic card; run with -update
// after an intended change and review the diff of testdata/sample.md.
func TestMarkdownGolden(t *testing.T) {
	t.Parallel()
	got := renderMarkdown(t, sampleCard(false), WriteOptions{NoTimings: true})
	path := filepath.Join("testdata", "sample.md")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}

func TestWritersRefuseFalsePass(t *testing.T) {
	t.Parallel()
	c := sampleCard(false)
	c.Passed = true
	err := WriteMarkdown(&bytes.Buffer{}, c, WriteOptions{})
	require.ErrorContains(t, err, `card says PASS but campaign "full-stack" failed`)
	c = sampleCard(false)
	c.Date = "../2025-12-02"
	_, err = WriteAll(t.TempDir(), c, WriteOptions{})
	require.ErrorContains(t, err, "is not YYYY-MM-DD")
}

func TestFleetSectionShowsFaultsJobsAndViolations(t *testing.T) {
	c := Card{Title: "t", Date: "2026-12-05", Fleet: &Fleet{Command: "rendermac fleet --seed 3", Agents: 4, Gateways: 2, Store: "s3",
		Faults:   []Count{{Name: "Mac sleep", N: 3}, {Name: "Wi-Fi loss", N: 2}, {Name: "object-store outage", Note: "not injected (filesystem store)"}},
		Jobs:     []Count{{Name: "succeeded", N: 40}, {Name: "cancelled", N: 5}},
		WastedMs: 1500, DrainMs: 9000, DrainBoundMs: 90000, Violations: []string{"agent 1 sent a commit after a lease_conflict"}}}
	var b strings.Builder
	if err := WriteMarkdown(&b, c, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Fleet", "rendermac fleet --seed 3", "sharing the s3 artifact store", "Mac sleep", "succeeded",
		"0 (not injected (filesystem store))", "1.5s", "9s", "VIOLATION agent 1 sent a commit"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
	if !regexp.MustCompile(`Mac sleep\s*\|\s*3\s*\|`).MatchString(b.String()) {
		t.Errorf("the fault table lacks Mac sleep's count:\n%s", b.String())
	}
	b.Reset()
	if err := WriteMarkdown(&b, c, WriteOptions{NoTimings: true}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "9s") || c.Fleet.DrainMs != 9000 {
		t.Errorf("NoTimings must drop the fleet's timings without changing the caller's card:\n%s", b.String())
	}
}

// TestFleetSectionShowsPrimaryLosses: the Patroni fleet's losses each get
// a row with their failover outage, "no job committed after it" for -1,
// and no outage at all with NoTimings (without touching the caller's card).
func TestFleetSectionShowsPrimaryLosses(t *testing.T) {
	c := Card{Title: "t", Date: "2026-12-07", Fleet: &Fleet{Command: "rendermac fleet --postgres patroni", Agents: 3, Gateways: 2,
		Postgres: "Patroni, 3 nodes, synchronous_mode",
		PrimaryLosses: []PrimaryLoss{{Kind: "primary killed", From: "pg0", To: "pg1", OutageMs: 13075},
			{Kind: "switchover", From: "pg1", To: "pg2", OutageMs: -1}}}}
	var b strings.Builder
	if err := WriteMarkdown(&b, c, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Postgres: Patroni, 3 nodes, synchronous_mode.", "pg0 -> pg1", "13.075s", "no job committed after it"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := WriteMarkdown(&b, c, WriteOptions{NoTimings: true}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "13.075s") || c.Fleet.PrimaryLosses[0].OutageMs != 13075 {
		t.Errorf("NoTimings must drop the outages without changing the caller's card:\n%s", b.String())
	}
}
