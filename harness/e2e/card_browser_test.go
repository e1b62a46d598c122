package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/evidence"
)

// bigCard is a card the size of a full qualify run's: three campaigns with
// their coverage matrices, 80 scenarios with 40-step timelines and long
// outcomes, 200 rules, and (failing) a failure with a long detail.
func bigCard(failing bool) evidence.Card {
	c := evidence.Card{Title: "Phase-fault qualification", Date: "2026-12-07", Passed: !failing, NoTimings: true}
	c.Run.Commit = "0123456789abcdef0123456789abcdef01234567"
	c.Run.Command = "rendermac qualify --seeds 500 --steps 200 --pg-seeds 500 --stack-seeds 200 " + strings.Repeat("--weight create=8 ", 12)
	statuses := []string{"queued", "active", "verifying", "cancelling", "succeeded", "cancelled", "failed"}
	tables := evidence.CoverageTables{JobStatuses: statuses, AttemptStatuses: statuses,
		JobTransitions: []string{"queued->active"}, AttemptTransitions: []string{"queued->active"}, FaultPhases: statuses}
	for _, name := range []string{"model", "model-vs-postgres", "model-vs-postgres-vs-stack"} {
		cov := &evidence.Coverage{JobTransitions: evidence.Counts{"queued->active": 123456}, AttemptTransitions: evidence.Counts{},
			Replies: evidence.Counts{"lease_conflict/phase_regression": 999}, Faults: evidence.Counts{"wrong_epoch": 5},
			FaultPhases: evidence.Counts{"wrong_epoch@committing": 77}, Tables: tables, Gate: true}
		c.Campaigns = append(c.Campaigns, evidence.Campaign{Name: name, Target: "stack", Seeds: 500, StepsPerSeq: 200,
			Sequences: 500, Steps: 100000, Passed: true, Coverage: cov})
	}
	long := strings.Repeat("a commit whose claimed output is at another attempt's key is refused commit_conflict and changes nothing; ", 3)
	for i := range 80 {
		s := evidence.Scenario{Name: fmt.Sprintf("scenario_with_a_rather_long_name_%02d", i), Fault: long, Phase: "committing",
			Expected: long, Observed: long + "/outputs/0a1b2c3d-0000-4000-8000-000000000000/0a1b2c3d-0000-4000-8000-000000000001.mp4",
			Passed: true}
		for step := range 40 {
			s.Timeline = append(s.Timeline, evidence.TimelineEvent{Lane: []string{"agent", "gateway", "database"}[step%3], Step: step,
				Label: "lease_offer j1#1 epoch=1 token=…"})
		}
		c.Scenarios = append(c.Scenarios, s)
	}
	rules := &evidence.Rules{MutationCard: "the mutation card of 2026-12-07, commit 0123456789ab"}
	for i := range 200 {
		rules.Rows = append(rules.Rows, evidence.RuleRow{ID: fmt.Sprintf("area.rule-%03d", i), Source: "docs/SPEC.md:123",
			Text: long, Mutants: []string{"a-mutant-with-a-long-identifier", "another-mutant"}, Proven: true,
			Checks: []evidence.RuleCheck{{Name: "campaign:model-vs-postgres-vs-stack", Ran: true}, {Name: "scenario:upload_during_verification@s3", Ran: true}}})
	}
	rules.Count()
	c.Rules = rules
	if failing {
		c.Failures = []evidence.Failure{{Source: "scenario upload_during_verification@s3",
			Detail: "step 12: want commit_ok, got commit_rejected{verification_failed}: " + long + strings.Repeat("x", 400),
			Replay: "go run -tags faultpoints ./cmd/rendermac scenarios --run upload_during_verification --artifacts-s3"}}
	}
	return c
}

// TestCardInBrowser opens a passing and a failing card of a full run's
// size in headless Chromium at 1280 px: the page never scrolls sideways
// (wide tables and timelines scroll in their own boxes), and the verdict
// and the first failure are on the first screen. Screenshots go to
// harness/e2e/testdata/out/card (or $RENDERMAC_TEST_ARTIFACTS/card).
func TestCardInBrowser(t *testing.T) {
	dir := t.TempDir()
	for _, failing := range []bool{false, true} {
		var buf bytes.Buffer
		require.NoError(t, evidence.WriteHTML(&buf, bigCard(failing), evidence.WriteOptions{NoTimings: true}))
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("card-%v.html", failing)), buf.Bytes(), 0o644))
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	const width, height = 1280, 800
	b := newBrowserSized(t, srv.URL, width, height)
	b.dir = filepath.Join(filepath.Dir(b.dir), "card")
	require.NoError(t, os.MkdirAll(b.dir, 0o755))
	for _, failing := range []bool{false, true} {
		page := fmt.Sprintf("/card-%v.html", failing)
		b.run("open "+page, chromedp.Navigate(srv.URL+page), chromedp.WaitReady(chromedp.CSS("#verdict")))
		// Folded sections (timelines, coverage matrices, the rule table)
		// are opened first: unfolded, they must still scroll in their own
		// boxes, not the page.
		opened := value(b, "open every section", chromedp.Evaluate[int](
			`(function(){var d=document.querySelectorAll('details');d.forEach(function(e){e.open=true});return d.length})()`))
		require.Greater(t, opened, 80, "%s: timelines and matrices are folded", page)
		sideways := value(b, "page width", chromedp.Evaluate[bool](
			`document.documentElement.scrollWidth > document.documentElement.clientWidth`))
		require.False(t, sideways, "%s scrolls sideways at %d px", page, width)
		verdictOnScreen := value(b, "verdict position", chromedp.Evaluate[bool](
			`document.querySelector('#verdict').getBoundingClientRect().bottom <= window.innerHeight`))
		require.True(t, verdictOnScreen, "%s: the verdict is below the first screen", page)
		want := "PASS"
		if failing {
			want = "FAIL"
			onScreen := value(b, "first failure position", chromedp.Evaluate[bool](
				`(function(){var e=document.querySelector('#failure-1');return !!e && e.getBoundingClientRect().bottom <= window.innerHeight})()`))
			require.True(t, onScreen, "%s: the first failure is not on the first screen", page)
			require.Contains(t, b.text("#failure-1"), "upload_during_verification")
		}
		require.Equal(t, want, b.text("#verdict"))
		value(b, "fold again", chromedp.Evaluate[bool](`(function(){document.querySelectorAll('details').forEach(function(e){e.open=false});return true})()`))
		// The first screen, as a reader opening the card sees it.
		png := value(b, "screenshot", chromedp.CaptureScreenshot())
		require.NoError(t, os.WriteFile(filepath.Join(b.dir, fmt.Sprintf("card-%s.png", strings.ToLower(want))), png, 0o644))
	}
}
