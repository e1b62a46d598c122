package evidence

import (
	"github.com/rendermac/rendermac/internal/provenance"

	"regexp"
	"slices"
)

// Reply codes of the sample's first campaign, in byte order.
var sampleCodes = []string{"COMMITTED", "EPOCH_MISMATCH", "LEASED", "NOT_LEASE_HOLDER", "STALE_TOKEN"}

// replies builds a Replies map by inserting codes in the given order, so
// tests can show that insertion order never reaches the output.
func replies(codes []string, counts map[string]int) map[string]int {
	m := map[string]int{}
	for _, c := range codes {
		m[c] = counts[c]
	}
	return m
}

// sampleCard is a failing run with one passing and one failing campaign,
// a failing scenario and every section filled in. reverse flips the order
// in which the reply-count map is built.
func sampleCard(reverse bool) Card {
	codes := slices.Clone(sampleCodes)
	if reverse {
		slices.Reverse(codes)
	}
	counts := map[string]int{"COMMITTED": 412, "EPOCH_MISMATCH": 37, "LEASED": 455, "NOT_LEASE_HOLDER": 21, "STALE_TOKEN": 9}
	return Card{
		Title:  "Phase-fault qualification",
		Date:   "2025-12-02",
		Passed: false,
		Run: RunInfo{
			Build: provenance.Build{Commit: "65d0d78", Dirty: true, GoVersion: "go1.26.0", SchemaVersion: 2,
				ModelVersion: "1+0a1b2c3d4e5f", GeneratorVersion: "1+5f4e3d2c1b0a"}, PostgresVersion: "17.2", PostgresKind: "docker",
			Host: "ci-mac-01", Command: "rendermac qualify --seed 42 --seeds 200", FirstSeed: 42, DurationMs: 62000,
		},
		Campaigns: []Campaign{
			{Name: "model-vs-postgres", Target: "both", Seeds: 200, FirstSeed: 42, StepsPerSeq: 60, Sequences: 200,
				Steps: 12000, Replies: replies(codes, counts), Passed: true, DurationMs: 41500},
			{Name: "full-stack", Target: "stack", Seeds: 20, FirstSeed: 242, StepsPerSeq: 40, Sequences: 20,
				Steps: 800, Replies: replies([]string{"LEASED", "COMMITTED"}, map[string]int{"LEASED": 40, "COMMITTED": 38}),
				Divergences: 1, Passed: false, DurationMs: 850},
		},
		Scenarios: []Scenario{
			{Name: "commit-postgres-restart", Fault: "Postgres restart", Phase: "commit: after verify, before tx",
				Expected: "COMMITTED once", Observed: "COMMITTED once", Passed: true, DurationMs: 1500,
				Timeline: []TimelineEvent{
					{Lane: "agent", Step: 1, Label: "commit frame"},
					{Lane: "gateway", Step: 2, Label: "verify output"},
					{Lane: "database", Step: 3, Label: "restart"},
					{Lane: "gateway", Step: 5, Label: "retry commit"},
					{Lane: "database", Step: 5, Label: "commit tx"},
				}},
			{Name: "sweep-clock-jump", Fault: "clock jump +2h", Phase: "sweep: before slot release",
				Expected: "attempt expired, slot freed", Observed: "slot leaked", Passed: false, DurationMs: 900},
		},
		Invariants: []Invariant{
			{Number: 2, Text: "A device holds at most one lease per slot."},
			{Number: 1, Text: "At most one attempt per job commits."},
		},
		Failures: []Failure{
			{Source: "full-stack", Seed: 257, Detail: "step 17: model NOT_LEASE_HOLDER, stack COMMITTED",
				Replay: "rendermac fuzz --target stack --seed 257 --steps 40", Target: "stack",
				Events: []string{"create", "lease", "commit"}},
			{Source: "sweep-clock-jump", Detail: "slot 3 still held after sweep",
				Replay: "rendermac scenario run sweep-clock-jump"},
		},
		NotCovered: []string{"Real FFmpeg encodes", "macOS sleep and wake"},
	}
}

// durationText matches anything the duration formatter can print.
var durationText = regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s|m\d+(\.\d+)?s|h\d+m\d+(\.\d+)?s)\b`)
