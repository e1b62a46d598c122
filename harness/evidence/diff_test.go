package evidence

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDiffIdentical(t *testing.T) {
	t.Parallel()
	require.Empty(t, Diff(sampleCard(false), sampleCard(true)))
	// Durations, title and date are not changes worth reporting.
	b := sampleCard(false)
	b.Run.DurationMs, b.Campaigns[0].DurationMs, b.Scenarios[0].DurationMs = 1, 2, 3
	b.Date = "2025-12-03"
	require.Empty(t, Diff(sampleCard(false), b))
}

func TestDiffReportsChanges(t *testing.T) {
	t.Parallel()
	a, b := sampleCard(false), sampleCard(false)
	b.Run.Commit = "9344688"
	b.Campaigns[0].Replies["STALE_TOKEN"] = 11
	delete(b.Campaigns[0].Replies, "EPOCH_MISMATCH")
	b.Campaigns[0].Replies["FOREIGN_DEVICE"] = 3
	b.Campaigns[1].Divergences, b.Campaigns[1].Passed = 0, true
	b.Scenarios[1].Observed, b.Scenarios[1].Passed = "attempt expired, slot freed", true
	b.Failures = []Failure{{Source: "model-vs-postgres", Seed: 77, Detail: "invariant 2 broken at step 9",
		Replay: "rendermac fuzz --seed 77"}}
	b.Campaigns[0].Passed = false
	b.NotCovered = []string{"Real FFmpeg encodes", "Network partitions"}
	require.Equal(t, []string{
		"run commit: 65d0d78 -> 9344688",
		"campaign full-stack divergences: 1 -> 0",
		"campaign full-stack verdict: FAIL -> PASS",
		"campaign model-vs-postgres verdict: PASS -> FAIL",
		"campaign model-vs-postgres reply EPOCH_MISMATCH: 37 -> 0",
		"campaign model-vs-postgres reply FOREIGN_DEVICE: 0 -> 3",
		"campaign model-vs-postgres reply STALE_TOKEN: 9 -> 11",
		"scenario sweep-clock-jump observed: slot leaked -> attempt expired, slot freed",
		"scenario sweep-clock-jump verdict: FAIL -> PASS",
		"failure removed: full-stack seed 257",
		"failure added: model-vs-postgres seed 77: invariant 2 broken at step 9",
		"failure removed: sweep-clock-jump",
		"not covered added: Network partitions",
		"not covered removed: macOS sleep and wake",
	}, Diff(a, b))
}

func TestDiffVerdictAndMembership(t *testing.T) {
	t.Parallel()
	a := Card{Date: "2025-12-02", Passed: true, Campaigns: []Campaign{{Name: "old", Passed: true}},
		Invariants: []Invariant{{Number: 1, Text: "one"}}}
	b := sampleCard(false)
	lines := Diff(a, b)
	require.Equal(t, "verdict: PASS -> FAIL", lines[0])
	require.Contains(t, lines, "campaign old removed")
	require.Contains(t, lines, "campaign full-stack added (20 seeds, 800 steps, FAIL)")
	require.Contains(t, lines, "scenario sweep-clock-jump added (FAIL)")
	require.Contains(t, lines, "invariant 1: one -> At most one attempt per job commits.")
	require.Contains(t, lines, "invariant 2 added: A device holds at most one lease per slot.")
	require.Contains(t, lines, "failure added: full-stack seed 257: step 17: model NOT_LEASE_HOLDER, stack COMMITTED")
	require.Contains(t, lines, "run Go version: \"\" -> go1.26.0")
	require.Equal(t, lines, Diff(a, b), "stable")
}

// Two runs of one commit differ in their Fleet section (real processes
// under a seeded schedule): Diff leaves it out, DiffLive reports it.
func TestFleetDiffersOnlyAsALiveMeasurement(t *testing.T) {
	a := Card{Passed: true, Fleet: &Fleet{Command: "fleet --seed 1", Faults: []Count{{Name: "mac_sleep", N: 2}},
		Jobs: []Count{{Name: "succeeded", N: 30}}}}
	b := a
	b.Fleet = &Fleet{Command: "fleet --seed 1", Faults: []Count{{Name: "mac_sleep", N: 3}}, Jobs: []Count{{Name: "succeeded", N: 29}},
		Violations: []string{"drain-bound: drained after 91s"}}
	require.Empty(t, Diff(a, b))
	require.Equal(t, []string{
		"fleet faults mac_sleep: 2 -> 3",
		"fleet jobs succeeded: 30 -> 29",
		"fleet violation added: drain-bound: drained after 91s",
	}, DiffLive(a, b))
	require.Empty(t, DiffLive(a, a))
}
