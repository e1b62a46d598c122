package evidence

import (
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/provenance"
)

// mergeRules says, for every field of a Card, how Merge treats it: checked
// (shards that differ in it are refused) or merged (combined, see Merge).
// Whole values (not walked into) are the slices moved as they are and the
// mutation score, which a shard never has. A field added to the card
// without a rule here fails TestMergeRulesNameEveryCardField; with a rule,
// the tests below hold Merge to it.
var mergeRules = map[string]string{
	"Card.Title":                                            "checked",
	"Card.Date":                                             "merged",
	"Card.Passed":                                           "merged",
	"Card.Run.Build.Commit":                                 "checked",
	"Card.Run.Build.Dirty":                                  "checked",
	"Card.Run.Build.GoVersion":                              "checked",
	"Card.Run.Build.SchemaVersion":                          "checked",
	"Card.Run.Build.ModelVersion":                           "checked",
	"Card.Run.Build.GeneratorVersion":                       "checked",
	"Card.Run.PostgresVersion":                              "checked",
	"Card.Run.PostgresKind":                                 "checked",
	"Card.Run.Host":                                         "merged",
	"Card.Run.Command":                                      "checked",
	"Card.Run.FirstSeed":                                    "checked",
	"Card.Run.GeneratorWeights":                             "checked",
	"Card.Run.DurationMs":                                   "merged",
	"Card.Run.Shard":                                        "merged",
	"Card.Campaigns[].Name":                                 "checked",
	"Card.Campaigns[].Target":                               "checked",
	"Card.Campaigns[].ArtifactStore":                        "checked",
	"Card.Campaigns[].Seeds":                                "merged",
	"Card.Campaigns[].FirstSeed":                            "checked",
	"Card.Campaigns[].StepsPerSeq":                          "checked",
	"Card.Campaigns[].Sequences":                            "merged",
	"Card.Campaigns[].Steps":                                "merged",
	"Card.Campaigns[].Replies":                              "merged",
	"Card.Campaigns[].Divergences":                          "merged",
	"Card.Campaigns[].Violations":                           "merged",
	"Card.Campaigns[].Errors":                               "merged",
	"Card.Campaigns[].Passed":                               "merged",
	"Card.Campaigns[].DurationMs":                           "merged",
	"Card.Campaigns[].TokensChecked":                        "merged",
	"Card.Campaigns[].Coverage.JobTransitions":              "merged",
	"Card.Campaigns[].Coverage.AttemptTransitions":          "merged",
	"Card.Campaigns[].Coverage.Replies":                     "merged",
	"Card.Campaigns[].Coverage.Faults":                      "merged",
	"Card.Campaigns[].Coverage.FaultPhases":                 "merged",
	"Card.Campaigns[].Coverage.Required.JobTransitions":     "checked",
	"Card.Campaigns[].Coverage.Required.AttemptTransitions": "checked",
	"Card.Campaigns[].Coverage.Required.Replies":            "checked",
	"Card.Campaigns[].Coverage.Required.Faults":             "checked",
	"Card.Campaigns[].Coverage.Tables.JobStatuses":          "checked",
	"Card.Campaigns[].Coverage.Tables.AttemptStatuses":      "checked",
	"Card.Campaigns[].Coverage.Tables.JobTransitions":       "checked",
	"Card.Campaigns[].Coverage.Tables.AttemptTransitions":   "checked",
	"Card.Campaigns[].Coverage.Tables.FaultPhases":          "checked",
	"Card.Campaigns[].Coverage.Gate":                        "checked",
	"Card.Scenarios":                                        "merged",
	"Card.Contract":                                         "checked",
	"Card.Invariants":                                       "checked",
	"Card.Failures":                                         "merged",
	"Card.NotCovered":                                       "merged",
	"Card.NoTimings":                                        "checked",
	"Card.MutationScore":                                    "checked",
	"Card.Fleet":                                            "checked",
	"Card.Rules.Total":                                      "merged",
	"Card.Rules.Checked":                                    "merged",
	"Card.Rules.Proven":                                     "merged",
	"Card.Rules.MutationCard":                               "checked",
	"Card.Rules.Rows":                                       "merged",
	// Each shard runs its slice of the linearizability rounds.
	"Card.Linearizability.Rounds":         "merged",
	"Card.Linearizability.FirstSeed":      "merged",
	"Card.Linearizability.Jobs":           "merged",
	"Card.Linearizability.Clients":        "merged",
	"Card.Linearizability.Histories":      "merged",
	"Card.Linearizability.Operations":     "merged",
	"Card.Linearizability.Recorded":       "merged",
	"Card.Linearizability.Longest":        "merged",
	"Card.Linearizability.RunMs":          "merged",
	"Card.Linearizability.CheckMs":        "merged",
	"Card.Linearizability.Passed":         "merged",
	"Card.Linearizability.Visualizations": "merged",
	"Card.Linearizability.Command":        "merged",
}

// wholeValues are walked no further: Merge moves or compares them whole.
var wholeValues = map[string]bool{"Card.Rules.Rows": true, "Card.Contract": true, "Card.Scenarios": true, "Card.Invariants": true, "Card.Failures": true,
	"Card.NotCovered": true, "Card.MutationScore": true, "Card.Fleet": true}

// cardPaths lists every leaf field of t as Card.Run.Host, Card.Campaigns[].Name...
func cardPaths(t reflect.Type, prefix string) []string {
	if wholeValues[prefix] {
		return []string{prefix}
	}
	switch t.Kind() {
	case reflect.Struct:
		var out []string
		for i := range t.NumField() {
			out = append(out, cardPaths(t.Field(i).Type, prefix+"."+t.Field(i).Name)...)
		}
		return out
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return cardPaths(t.Elem(), prefix+"[]")
		}
	case reflect.Pointer:
		return cardPaths(t.Elem(), prefix)
	}
	return []string{prefix}
}

// values returns the field at path in every element on the way (every
// campaign for Card.Campaigns[].Name).
func values(v reflect.Value, path string) []reflect.Value {
	parts := strings.Split(strings.TrimPrefix(path, "Card."), ".")
	cur := []reflect.Value{v}
	for _, p := range parts {
		var next []reflect.Value
		name, each := strings.CutSuffix(p, "[]")
		for _, c := range cur {
			if c.Kind() == reflect.Pointer {
				if c.IsNil() {
					continue
				}
				c = c.Elem()
			}
			f := c.FieldByName(name)
			if !each {
				next = append(next, f)
				continue
			}
			for i := range f.Len() {
				next = append(next, f.Index(i))
			}
		}
		cur = next
	}
	return cur
}

func TestMergeRulesNameEveryCardField(t *testing.T) {
	paths := cardPaths(reflect.TypeOf(Card{}), "Card")
	sort.Strings(paths)
	var ruled []string
	for p := range mergeRules {
		ruled = append(ruled, p)
	}
	sort.Strings(ruled)
	require.Equal(t, ruled, paths, "a card field without a merge rule (or a rule for a field that is gone): "+
		"decide how Merge combines it or checks it equal, then add it to mergeRules and the fixture")
}

const testCommit = "0123456789abcdef0123456789abcdef01234567"

// shardFixture is two shards of one run in which every field is set in at
// least one shard (TestMergeFixtureSetsEveryField), so comparing Merge's
// result with the expected card tests every merged field.
func shardFixture() []ShardCard {
	build := provenance.Build{Commit: testCommit, Dirty: true, GoVersion: "go1.26.8", SchemaVersion: 2,
		ModelVersion: "1+m", GeneratorVersion: "3+g"}
	run := RunInfo{Build: build, PostgresVersion: "15.18", PostgresKind: "local", Host: "ci-1",
		Command: "rendermac qualify --seeds 5", GeneratorWeights: "create=8 lease=12", FirstSeed: 1, DurationMs: 1000, Shard: "1/2"}
	required := CoverageRequired{JobTransitions: []string{"queued->active"}, AttemptTransitions: []string{"leased->running"},
		Replies: []string{"created", "no_job"}, Faults: []string{"wrong_epoch"}}
	tables := CoverageTables{JobStatuses: []string{"queued", "active"}, AttemptStatuses: []string{"leased", "running"},
		JobTransitions: []string{"queued->active"}, AttemptTransitions: []string{"leased->running"}, FaultPhases: []string{"leased"}}
	// Shard 1 reaches every required cell but the wrong_epoch fault and
	// the no_job reply, shard 2 reaches those: the sum passes the gate.
	cov1 := &Coverage{JobTransitions: Counts{"queued->active": 2}, AttemptTransitions: Counts{"leased->running": 1},
		Replies: Counts{"created": 3}, Faults: Counts{}, FaultPhases: Counts{"stale_token@leased": 1},
		Required: required, Tables: tables, Gate: true}
	cov2 := &Coverage{JobTransitions: Counts{"queued->active": 1, "active->queued": 4}, AttemptTransitions: Counts{},
		Replies: Counts{"no_job": 1}, Faults: Counts{"wrong_epoch": 5}, FaultPhases: Counts{},
		Required: required, Tables: tables, Gate: true}
	inv := []Invariant{{Number: 1, Text: "one live attempt"}}
	one := Card{Title: "Phase-fault qualification", Date: "2026-12-03", Passed: true, Run: run, Invariants: inv, NoTimings: true,
		Contract: []ContractCheck{{Table: "retryable failure codes", Source: "docs/SPEC.md:106", Contract: "`no_capacity`", Passed: true}},
		Campaigns: []Campaign{
			{Name: "model", Target: "model", ArtifactStore: "fs", Seeds: 2, FirstSeed: 1, StepsPerSeq: 20, Sequences: 2, Steps: 40,
				Replies: map[string]int{"created": 3, "no_job": 1}, Passed: true, DurationMs: 10, Coverage: cov1, TokensChecked: 7},
			{Name: "determinism: model", Target: "model", Seeds: 1, FirstSeed: 1, StepsPerSeq: 20, Sequences: 2, Steps: 40,
				Replies: map[string]int{}, Passed: true, DurationMs: 5},
		},
		Scenarios:  []Scenario{{Name: "happy_path", Fault: "none", Phase: "all", Expected: "ok", Observed: "ok", Passed: true, DurationMs: 7}},
		NotCovered: []string{"Mac sleep.", "Scenario a was not run: no ffmpeg."},
		Rules: &Rules{Total: 2, Checked: 1, Proven: 1, MutationCard: "2026-12-02 at 0123456",
			Rows: []RuleRow{
				{ID: "a.one", Source: "docs/SPEC.md:1", Text: "one", Mutants: []string{"m1"}, Proven: true,
					Checks: []RuleCheck{{Name: "scenario:happy_path", Ran: true}}},
				{ID: "a.two", Source: "docs/SPEC.md:2", Text: "two",
					Checks: []RuleCheck{{Name: "scenario:wrong_epoch", Why: "shard 1/2"}}},
			}},
	}
	one.Linearizability = &Linearizability{Rounds: 1, FirstSeed: 1, Jobs: 10, Clients: 27, Histories: 10, Operations: 400,
		Recorded: 700, Longest: 50, RunMs: 1500, CheckMs: 20, Passed: true, Command: "rendermac qualify --linearize-rounds 2"}
	two := one
	two.Linearizability = &Linearizability{Rounds: 1, FirstSeed: 2, Jobs: 10, Clients: 27, Histories: 9, Operations: 380,
		Recorded: 690, Longest: 61, RunMs: 1600, CheckMs: 30, Visualizations: []string{"out/linearizability-seed-2.html"},
		Command: "rendermac qualify --linearize-rounds 2"}
	two.Rules = &Rules{Total: 2, Checked: 1, Proven: 1, MutationCard: "2026-12-02 at 0123456",
		Rows: []RuleRow{
			{ID: "a.one", Source: "docs/SPEC.md:1", Text: "one", Mutants: []string{"m1"}, Proven: true,
				Checks: []RuleCheck{{Name: "scenario:happy_path", Why: "shard 2/2"}}},
			{ID: "a.two", Source: "docs/SPEC.md:2", Text: "two",
				Checks: []RuleCheck{{Name: "scenario:wrong_epoch", Ran: true}}},
		}}
	two.Date, two.Passed = "2026-12-04", false
	two.Run.Host, two.Run.DurationMs, two.Run.Shard = "ci-2", 2000, "2/2"
	two.Campaigns = []Campaign{
		{Name: "model", Target: "model", ArtifactStore: "fs", Seeds: 3, FirstSeed: 3, StepsPerSeq: 20, Sequences: 3, Steps: 59,
			Replies: map[string]int{"created": 4, "sweep": 2}, Divergences: 1, Violations: 2, Errors: 3, DurationMs: 20, Coverage: cov2, TokensChecked: 5},
		{Name: "determinism: model", Target: "model", Seeds: 1, FirstSeed: 2, StepsPerSeq: 20, Sequences: 2, Steps: 40,
			Divergences: 1, DurationMs: 6},
	}
	two.Scenarios = []Scenario{{Name: "wrong_epoch", Fault: "f", Phase: "p", Expected: "e", Observed: "o",
		Timeline: []TimelineEvent{{Lane: "agent", Step: 1, Label: "x"}}, DurationMs: 8}}
	two.Failures = []Failure{
		{Source: "model", Seed: 3, Detail: "divergence", Replay: "fuzz --seed 3", Target: "model", Variant: "m", Events: []string{"tick"}},
		{Source: "model", Seed: 4, Detail: "violation", Replay: "fuzz --seed 4", Target: "model", Variant: "m"},
		{Source: "determinism: model", Seed: 2, Detail: "differs", Replay: "fuzz --seed 2"},
		{Source: "scenario wrong_epoch", Detail: "lost", Replay: "scenarios --run wrong_epoch"},
	}
	two.NotCovered = []string{"Mac sleep.", "Scenario b was not run: no ffmpeg."}
	// The scenario failure comes first in the shard's own list only to
	// show that Merge orders campaigns' failures before scenarios'.
	two.Failures = append(two.Failures[3:], two.Failures[:3]...)
	return []ShardCard{{Name: "two.json", Card: two}, {Name: "one.json", Card: one}}
}

func TestMergeFixtureSetsEveryField(t *testing.T) {
	for path, rule := range mergeRules {
		if path == "Card.MutationScore" || path == "Card.Fleet" { // a shard never has one (qualify --shard runs no fleet)
			continue
		}
		set := false
		for _, s := range shardFixture() {
			for _, v := range values(reflect.ValueOf(s.Card), path) {
				set = set || !v.IsZero() && (v.Kind() != reflect.Slice || v.Len() > 0)
			}
		}
		require.True(t, set, "%s (%s) is zero in every shard of the fixture, so no test shows how it merges", path, rule)
	}
}

func TestMergeCombinesShardsInUnshardedOrder(t *testing.T) {
	shards := shardFixture()
	one, two := shards[1].Card, shards[0].Card
	got, err := Merge(shards)
	require.NoError(t, err)
	want := one
	want.Passed = false
	want.Run.Host, want.Run.DurationMs, want.Run.Shard = "ci-1, ci-2", 3000, ""
	want.Campaigns = []Campaign{
		{Name: "model", Target: "model", ArtifactStore: "fs", Seeds: 5, FirstSeed: 1, StepsPerSeq: 20, Sequences: 5, Steps: 99,
			Replies: map[string]int{"created": 7, "no_job": 1, "sweep": 2}, Divergences: 1, Violations: 2, Errors: 3, DurationMs: 30,
			TokensChecked: 12,
			Coverage: &Coverage{JobTransitions: Counts{"queued->active": 3, "active->queued": 4},
				AttemptTransitions: Counts{"leased->running": 1}, Replies: Counts{"created": 3, "no_job": 1},
				Faults: Counts{"wrong_epoch": 5}, FaultPhases: Counts{"stale_token@leased": 1},
				Required: one.Campaigns[0].Coverage.Required, Tables: one.Campaigns[0].Coverage.Tables, Gate: true}},
		{Name: "determinism: model", Target: "model", Seeds: 2, FirstSeed: 1, StepsPerSeq: 20, Sequences: 4, Steps: 80,
			Replies: map[string]int{}, Divergences: 1, DurationMs: 11},
	}
	want.Scenarios = append(one.Scenarios, two.Scenarios...)
	want.Linearizability = &Linearizability{Rounds: 2, FirstSeed: 1, Jobs: 10, Clients: 27, Histories: 19, Operations: 780,
		Recorded: 1390, Longest: 61, RunMs: 3100, CheckMs: 50, Visualizations: []string{"out/linearizability-seed-2.html"},
		Command: "rendermac qualify --linearize-rounds 2"}
	want.Failures = []Failure{two.Failures[1], two.Failures[2], two.Failures[3], two.Failures[0]}
	want.NotCovered = []string{"Mac sleep.", "Scenario a was not run: no ffmpeg.", "Scenario b was not run: no ffmpeg."}
	want.Rules = &Rules{Total: 2, Checked: 2, Proven: 1, MutationCard: "2026-12-02 at 0123456",
		Rows: []RuleRow{
			{ID: "a.one", Source: "docs/SPEC.md:1", Text: "one", Mutants: []string{"m1"}, Proven: true,
				Checks: []RuleCheck{{Name: "scenario:happy_path", Ran: true}}},
			{ID: "a.two", Source: "docs/SPEC.md:2", Text: "two",
				Checks: []RuleCheck{{Name: "scenario:wrong_epoch", Ran: true}}},
		}}
	require.Equal(t, want, got)
	require.Equal(t, "model", got.Failures[0].Source)
	require.Equal(t, "scenario wrong_epoch", got.Failures[3].Source)

	// The inputs are not modified.
	require.Equal(t, shardFixture(), shards)
}

// Every shard checks the contract: a failing table is one failure of the
// merged card, not one per shard.
func TestMergeListsContractFailuresOnce(t *testing.T) {
	shards := shardFixture()
	for i := range shards {
		c := &shards[i].Card
		c.Passed = false
		c.Contract = []ContractCheck{{Table: "retryable failure codes", Source: "docs/SPEC.md:106", Contract: "`no_capacity`",
			Detail: "`no_capacity` is in the contract's list, not in protocol"}}
		c.Failures = append([]Failure{{Source: ContractSource, Detail: "retryable failure codes", Replay: "rendermac qualify"}}, c.Failures...)
	}
	got, err := Merge(shards)
	require.NoError(t, err)
	n := 0
	for _, f := range got.Failures {
		if f.Source == ContractSource {
			n++
		}
	}
	require.Equal(t, 1, n, "the contract's failure once, from the first shard")
	require.False(t, got.Passed)
}

// Changing any checked field in one shard makes Merge refuse the pair.
func TestMergeRefusesShardsDifferingInACheckedField(t *testing.T) {
	for path, rule := range mergeRules {
		if rule != "checked" {
			continue
		}
		shards := shardFixture()
		v := values(reflect.ValueOf(&shards[0].Card).Elem(), path)[0]
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "-other")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Int, reflect.Int64:
			v.SetInt(v.Int() + 1)
		case reflect.Uint64:
			v.SetUint(v.Uint() + 1)
		case reflect.Slice:
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
		default:
			t.Fatalf("%s: no way to change a %s; teach this test", path, v.Kind())
		}
		_, err := Merge(shards)
		require.Error(t, err, "shards differing in %s were merged", path)
		require.Contains(t, err.Error(), "two.json", path)
	}
}

func TestMergeRefusesAnIncompleteOrForeignSet(t *testing.T) {
	withShard := func(name, sh string) ShardCard {
		c := shardFixture()[1]
		c.Name, c.Card.Run.Shard = name, sh
		return c
	}
	for _, tc := range []struct {
		shards []ShardCard
		want   string
	}{
		{nil, "no shard cards given"},
		{[]ShardCard{withShard("a.json", "1/3"), withShard("c.json", "3/3")}, "missing shard 2/3 (given 2 of 3)"},
		{[]ShardCard{withShard("a.json", "1/2"), withShard("b.json", "1/2")}, "shard 1/2 given twice: a.json and b.json"},
		{[]ShardCard{withShard("a.json", "1/2"), withShard("b.json", "2/3")}, "b.json is shard 2/3 but a.json is one of 2 shards"},
		{[]ShardCard{withShard("a.json", "1/2"), withShard("full.json", "")}, "full.json is not a shard card"},
		{[]ShardCard{withShard("a.json", "0/2")}, `a.json: shard "0/2": K must be between 1 and N=2`},
	} {
		_, err := Merge(tc.shards)
		require.ErrorContains(t, err, tc.want)
	}
	ms := withShard("m.json", "1/1")
	ms.Card.MutationScore = &MutationScore{}
	_, err := Merge([]ShardCard{ms})
	require.ErrorContains(t, err, "m.json is a mutation-score card")

	// One shard of one is the whole run.
	got, err := Merge([]ShardCard{withShard("a.json", "1/1")})
	require.NoError(t, err)
	require.Empty(t, got.Run.Shard)
}

func TestMergeRefusesOverlappingScenariosAndMisalignedCampaigns(t *testing.T) {
	shards := shardFixture()
	shards[0].Card.Scenarios[0].Name = "happy_path"
	_, err := Merge(shards)
	require.ErrorContains(t, err, "scenario happy_path is in both one.json and two.json")

	shards = shardFixture()
	shards[0].Card.Campaigns = shards[0].Card.Campaigns[:1]
	_, err = Merge(shards)
	require.ErrorContains(t, err, "one.json has 2 campaigns, two.json has 1")

	// A shard without Postgres (its slices needed none) records none.
	shards = shardFixture()
	shards[1].Card.Run.PostgresVersion, shards[1].Card.Run.PostgresKind = "", ""
	got, err := Merge(shards)
	require.NoError(t, err)
	require.Equal(t, "15.18", got.Run.PostgresVersion)
	require.Equal(t, "local", got.Run.PostgresKind)
}

// Shards leave the coverage gate to Merge: a cell no shard reached fails
// the merged campaign, its failure right after the campaign's seeds'; a
// cell one shard reached passes; without the gate nothing fails.
func TestMergeGatesTheSummedCoverage(t *testing.T) {
	shards := shardFixture()
	one, two := &shards[1].Card, &shards[0].Card
	two.Failures, two.Passed, two.Scenarios[0].Passed = nil, true, true
	two.Campaigns[0].Divergences, two.Campaigns[0].Violations, two.Campaigns[0].Errors = 0, 0, 0
	two.Campaigns[0].Passed, two.Campaigns[1].Divergences, two.Campaigns[1].Passed = true, 0, true
	got, err := Merge(shards)
	require.NoError(t, err)
	require.True(t, got.Passed, "together the shards reach every required cell")
	require.Empty(t, got.Failures)

	for _, c := range []*Card{one, two} {
		req := c.Campaigns[0].Coverage.Required
		req.Faults = append(slices.Clone(req.Faults), "clock_jump")
		c.Campaigns[0].Coverage = &Coverage{JobTransitions: c.Campaigns[0].Coverage.JobTransitions,
			AttemptTransitions: c.Campaigns[0].Coverage.AttemptTransitions, Replies: c.Campaigns[0].Coverage.Replies,
			Faults: c.Campaigns[0].Coverage.Faults, FaultPhases: c.Campaigns[0].Coverage.FaultPhases,
			Required: req, Tables: c.Campaigns[0].Coverage.Tables, Gate: true}
	}
	// A shard's own gate failure (a card from before shards deferred it)
	// is replaced by the one of the sums.
	two.Failures = []Failure{{Source: CoverageSource("model"), Detail: "shard's own"}}
	two.Passed, two.Campaigns[0].Passed = false, false
	one.Failures = []Failure{{Source: "scenario happy_path", Detail: "lost"}}
	one.Passed, one.Scenarios[0].Passed = false, false
	got, err = Merge(shards)
	require.NoError(t, err)
	require.False(t, got.Passed)
	require.False(t, got.Campaigns[0].Passed)
	require.Len(t, got.Failures, 2)
	require.Equal(t, CoverageSource("model"), got.Failures[0].Source)
	require.Contains(t, got.Failures[0].Detail, "1 required cells never reached: fault clock_jump")
	require.Equal(t, "scenario happy_path", got.Failures[1].Source)

	one.Campaigns[0].Coverage.Gate, two.Campaigns[0].Coverage.Gate = false, false
	two.Failures, two.Passed, two.Campaigns[0].Passed = nil, true, true
	got, err = Merge(shards)
	require.NoError(t, err)
	require.True(t, got.Campaigns[0].Passed, "--no-coverage-gate: recorded, not gated")
	require.Len(t, got.Failures, 1)
}
