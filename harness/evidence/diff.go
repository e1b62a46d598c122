package evidence

import (
	"fmt"
	"slices"
	"strconv"
)

// Diff returns one human-readable line per difference between run a and run
// b, for a release manager comparing two qualification runs: the verdict,
// run info, campaigns, scenarios, invariants, failures and what is not
// covered, in that order and sorted within each part. Durations, the title
// and the date are ignored because they differ between any two runs.
// Identical runs give no lines (a nil slice).
func Diff(a, b Card) []string {
	var d differ
	d.field("verdict", verdict(a.Passed), verdict(b.Passed))
	d.run(a.Run, b.Run)
	d.campaigns(a.Campaigns, b.Campaigns)
	d.scenarios(a.Scenarios, b.Scenarios)
	d.invariants(a.Invariants, b.Invariants)
	d.failures(a.Failures, b.Failures)
	d.set("not covered", a.NotCovered, b.NotCovered)
	d.rules(a.Rules, b.Rules)
	return d.lines
}

// DiffLive returns one line per difference between the live measurements
// of runs a and b: the Fleet section, which counts what real processes did
// under a seeded fault schedule (faults by kind, jobs by outcome, wasted
// work, drain time, violations) and so varies between two runs of one
// commit. Diff leaves it out; `card diff` prints it apart.
func DiffLive(a, b Card) []string {
	var d differ
	x, y := a.Fleet, b.Fleet
	switch {
	case x == nil && y == nil:
		return nil
	case x == nil:
		d.addf("fleet added (%d agents, %d gateways)", y.Agents, y.Gateways)
		return d.lines
	case y == nil:
		d.addf("fleet removed")
		return d.lines
	}
	d.field("fleet command", x.Command, y.Command)
	d.field("fleet store", x.Store, y.Store)
	for _, part := range []struct {
		what string
		a, b []Count
	}{{"fleet faults", x.Faults, y.Faults}, {"fleet jobs", x.Jobs, y.Jobs}} {
		was, now := index(part.a, func(c Count) string { return c.Name }), index(part.b, func(c Count) string { return c.Name })
		for _, k := range keys(was, now) {
			d.num(part.what+" "+k, was[k].N, now[k].N)
		}
	}
	d.num("fleet wasted ms", int(x.WastedMs), int(y.WastedMs))
	d.num("fleet drain ms", int(x.DrainMs), int(y.DrainMs))
	d.set("fleet violation", x.Violations, y.Violations)
	return d.lines
}

// rules reports the rule inventory's counts and every rule whose check
// status or proof changed.
func (d *differ) rules(a, b *Rules) {
	switch {
	case a == nil && b == nil:
		return
	case a == nil:
		d.addf("rules added (%d rules, %d checked)", b.Total, b.Checked)
		return
	case b == nil:
		d.addf("rules removed")
		return
	}
	d.num("rules in the contract", a.Total, b.Total)
	d.num("rules checked", a.Checked, b.Checked)
	d.num("rules proven", a.Proven, b.Proven)
	d.field("rules mutation card", a.MutationCard, b.MutationCard)
	was, now := index(a.Rows, func(r RuleRow) string { return r.ID }), index(b.Rows, func(r RuleRow) string { return r.ID })
	for _, id := range keys(was, now) {
		x, inA := was[id]
		y, inB := now[id]
		switch {
		case !inB:
			d.addf("rule %s removed", id)
		case !inA:
			d.addf("rule %s added", id)
		default:
			d.field("rule "+id+" checked", strconv.FormatBool(x.Checked()), strconv.FormatBool(y.Checked()))
			d.field("rule "+id+" proven", strconv.FormatBool(x.Proven), strconv.FormatBool(y.Proven))
		}
	}
}

type differ struct{ lines []string }

func (d *differ) addf(format string, args ...any) {
	d.lines = append(d.lines, fmt.Sprintf(format, args...))
}

// field reports one changed value as "what: old -> new".
func (d *differ) field(what, was, now string) {
	if was != now {
		d.addf("%s: %s -> %s", what, show(was), show(now))
	}
}

func (d *differ) num(what string, was, now int) {
	d.field(what, strconv.Itoa(was), strconv.Itoa(now))
}

func (d *differ) run(a, b RunInfo) {
	d.field("run commit", a.Commit, b.Commit)
	d.field("run Go version", a.GoVersion, b.GoVersion)
	d.field("run Postgres version", a.PostgresVersion, b.PostgresVersion)
	d.field("run Postgres kind", a.PostgresKind, b.PostgresKind)
	d.field("run host", a.Host, b.Host)
	d.field("run command", a.Command, b.Command)
	d.field("run first seed", strconv.FormatUint(a.FirstSeed, 10), strconv.FormatUint(b.FirstSeed, 10))
	d.field("run shard", a.Shard, b.Shard)
}

func (d *differ) campaigns(a, b []Campaign) {
	was, now := index(a, func(c Campaign) string { return c.Name }), index(b, func(c Campaign) string { return c.Name })
	for _, name := range keys(was, now) {
		x, inA := was[name]
		y, inB := now[name]
		what := "campaign " + name
		switch {
		case !inB:
			d.addf("%s removed", what)
		case !inA:
			d.addf("%s added (%d seeds, %d steps, %s)", what, y.Seeds, y.Steps, verdict(y.Passed))
		default:
			d.field(what+" target", x.Target, y.Target)
			d.field(what+" first seed", strconv.FormatUint(x.FirstSeed, 10), strconv.FormatUint(y.FirstSeed, 10))
			d.num(what+" seeds", x.Seeds, y.Seeds)
			d.num(what+" steps/sequence", x.StepsPerSeq, y.StepsPerSeq)
			d.num(what+" sequences", x.Sequences, y.Sequences)
			d.num(what+" steps", x.Steps, y.Steps)
			d.num(what+" divergences", x.Divergences, y.Divergences)
			d.num(what+" violations", x.Violations, y.Violations)
			d.num(what+" errors", x.Errors, y.Errors)
			d.field(what+" verdict", verdict(x.Passed), verdict(y.Passed))
			// A code missing on one side counts as 0: it was never replied.
			for _, code := range keys(x.Replies, y.Replies) {
				d.num(what+" reply "+code, x.Replies[code], y.Replies[code])
			}
		}
	}
}

func (d *differ) scenarios(a, b []Scenario) {
	was, now := index(a, Scenario.Key), index(b, Scenario.Key)
	for _, name := range keys(was, now) {
		x, inA := was[name]
		y, inB := now[name]
		what := "scenario " + name
		switch {
		case !inB:
			d.addf("%s removed", what)
		case !inA:
			d.addf("%s added (%s)", what, verdict(y.Passed))
		default:
			d.field(what+" injected fault", x.Fault, y.Fault)
			d.field(what+" phase", x.Phase, y.Phase)
			d.field(what+" expected", x.Expected, y.Expected)
			d.field(what+" observed", x.Observed, y.Observed)
			d.field(what+" verdict", verdict(x.Passed), verdict(y.Passed))
		}
	}
}

func (d *differ) invariants(a, b []Invariant) {
	key := func(i Invariant) string { return fmt.Sprintf("%06d", i.Number) } // numeric order as strings
	was, now := index(a, key), index(b, key)
	for _, k := range keys(was, now) {
		x, inA := was[k]
		y, inB := now[k]
		switch {
		case !inB:
			d.addf("invariant %d removed: %s", x.Number, oneLine(x.Text))
		case !inA:
			d.addf("invariant %d added: %s", y.Number, oneLine(y.Text))
		default:
			d.field(fmt.Sprintf("invariant %d", x.Number), x.Text, y.Text)
		}
	}
}

// failures matches failures by source and seed: the same seed failing again
// is the same failure, whatever its detail says this time.
func (d *differ) failures(a, b []Failure) {
	was, now := index(a, failureTitle), index(b, failureTitle)
	for _, k := range keys(was, now) {
		x, inA := was[k]
		y, inB := now[k]
		switch {
		case !inB:
			d.addf("failure removed: %s", k)
		case !inA:
			d.addf("failure added: %s: %s", k, oneLine(y.Detail))
		default:
			d.field("failure "+k+" replay", x.Replay, y.Replay)
		}
	}
}

func (d *differ) set(what string, a, b []string) {
	was, now := index(a, oneLine), index(b, oneLine)
	for _, k := range keys(was, now) {
		_, inA := was[k]
		_, inB := now[k]
		switch {
		case !inB:
			d.addf("%s removed: %s", what, k)
		case !inA:
			d.addf("%s added: %s", what, k)
		}
	}
}

// index keys items by key; a repeated key gets " #2", " #3" so duplicates
// are compared pairwise instead of one hiding the other.
func index[T any](items []T, key func(T) string) map[string]T {
	m := make(map[string]T, len(items))
	for _, it := range items {
		k := key(it)
		for n := 2; ; n++ {
			if _, dup := m[k]; !dup {
				break
			}
			k = fmt.Sprintf("%s #%d", key(it), n)
		}
		m[k] = it
	}
	return m
}

// keys returns the union of both maps' keys, sorted, which fixes the order
// of every part of the diff.
func keys[V any](a, b map[string]V) []string {
	out := make([]string, 0, len(a)+len(b))
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func show(s string) string {
	if s = oneLine(s); s == "" {
		return `""`
	}
	return s
}
