package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/olekukonko/tablewriter"

	"github.com/rendermac/rendermac/harness/contract"
	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/harness/fleet"
	"github.com/rendermac/rendermac/harness/mutate"
	"github.com/rendermac/rendermac/harness/scenarios"
)

// ruleTrace is the contract's rules with the checks of this binary's
// qualify that reach them (contract.Traced and the scenario catalogue's
// headers) and the mutation catalogue's mutants that break them; an error
// names every dangling rule id and every check name qualify cannot run.
func ruleTrace() ([]contract.RuleTrace, error) {
	rules, err := contract.Rules()
	if err != nil {
		return nil, err
	}
	byScenario := map[string][]string{}
	for _, s := range scenarios.Catalogue() {
		byScenario[s.Name] = s.Rules
	}
	byMutant := map[string][]string{}
	var untraced []string
	for _, m := range mutate.Catalogue {
		if len(m.Rules) == 0 {
			untraced = append(untraced, fmt.Sprintf("mutant %s names no rule: say which rule of the contract it breaks", m.ID))
		}
		byMutant[m.ID] = m.Rules
	}
	trace, err := contract.Trace(rules, byScenario, byMutant)
	var problems []string
	if err != nil {
		problems = append(problems, err.Error())
	}
	problems = append(problems, untraced...)
	known := knownChecks()
	for _, id := range sortedMapKeys(contract.Traced) {
		for _, c := range contract.Traced[id] {
			if !known[c] {
				problems = append(problems, fmt.Sprintf("contract.Traced: rule %s names check %q, which qualify does not run", id, c))
			}
		}
	}
	if len(problems) > 0 {
		return trace, errors.New(strings.Join(problems, "\n"))
	}
	return trace, nil
}

// qualifyCampaigns are the campaigns qualify runs, by card name.
var qualifyCampaigns = []string{"model", "model-vs-postgres", "model-vs-postgres-vs-stack"}

// knownChecks is every check name qualify can run (contract.Traced's
// vocabulary).
func knownChecks() map[string]bool {
	known := map[string]bool{"campaign-tokens": true}
	for _, c := range qualifyCampaigns {
		known["campaign:"+c] = true
	}
	for _, r := range contract.CheckEmbedded() {
		known["contract:"+r.Table] = true
	}
	for _, s := range scenarios.Catalogue() {
		known["scenario:"+s.Name] = true
		known["scenario:"+s.Name+"@s3"] = true
	}
	for _, id := range fleet.CheckIDs() {
		known["fleet:"+id] = true
	}
	return known
}

func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ranChecks is what one qualify run ran, read off its card, and why the
// rest did not run, from its flags.
type ranChecks struct {
	ran map[string]bool
	f   qualifyFlags
	// notRun holds the scenarios that could not run here, with why.
	notRun map[string]string
}

func newRanChecks(card evidence.Card, f qualifyFlags, fleetChecks []string, notRunnable map[string]string) ranChecks {
	r := ranChecks{ran: map[string]bool{}, f: f, notRun: notRunnable}
	for _, c := range card.Campaigns {
		if c.Sequences > 0 && !strings.HasPrefix(c.Name, "determinism:") {
			r.ran["campaign:"+c.Name] = true
			r.ran["campaign-tokens"] = true
		}
	}
	for _, k := range card.Contract {
		r.ran["contract:"+k.Table] = true
	}
	for _, s := range card.Scenarios {
		r.ran["scenario:"+s.Key()] = true
		if s.ArtifactStore == "fs" || s.ArtifactStore == "" {
			r.ran["scenario:"+s.Name] = true
		}
	}
	for _, id := range fleetChecks {
		r.ran["fleet:"+id] = true
	}
	return r
}

// why says why check did not run in this run.
func (r ranChecks) why(check string) string {
	kind, name, _ := strings.Cut(check, ":")
	switch kind {
	case "campaign", "campaign-tokens":
		switch {
		case name == "model-vs-postgres" && r.f.pgSeeds == 0:
			return "--pg-seeds 0"
		case name == "model-vs-postgres-vs-stack" && r.f.stackSeeds == 0:
			return "--stack-seeds 0"
		case r.f.shard.Sharded():
			return "shard " + r.f.shard.String() + " holds none of its seeds"
		}
		return "the campaign did not run"
	case "scenario":
		base, s3 := strings.CutSuffix(name, "@s3")
		switch {
		case r.f.noScenarios:
			return "--no-scenarios"
		case r.notRun[base] != "":
			return r.notRun[base]
		case s3 && r.notRun["@s3"] != "":
			return r.notRun["@s3"]
		case s3 && !r.f.artifactsS3:
			if list, err := scenarios.Select(r.f.s3Scenarios); err != nil || !slices.ContainsFunc(list, func(s scenarios.Scenario) bool { return s.Name == base }) {
				return "not in --s3-scenarios"
			}
		}
		if list, err := scenarios.Select(r.f.scenarios); err == nil && !slices.ContainsFunc(list, func(s scenarios.Scenario) bool { return s.Name == base }) {
			return "not selected by --scenarios"
		}
		if r.f.shard.Sharded() {
			return "in another shard than " + r.f.shard.String()
		}
		return "the scenario did not run"
	case "fleet":
		switch {
		case r.f.noFleet:
			return "--no-fleet"
		case r.f.shard.Sharded():
			return "a shard runs no fleet campaign"
		}
		return "the fleet campaign did not report it"
	}
	return "not run"
}

// ruleSection builds the card's Rules section from the trace, what this
// run ran and the mutation card (nil: none read, with why in note).
func ruleSection(trace []contract.RuleTrace, r ranChecks, score *evidence.MutationScore, note string) *evidence.Rules {
	killed := map[string]bool{}
	inCard := map[string]bool{}
	if score != nil {
		for _, m := range score.Mutants {
			inCard[m.ID] = true
			killed[m.ID] = m.ByQualify()
		}
	}
	sec := &evidence.Rules{MutationCard: note}
	for _, t := range trace {
		row := evidence.RuleRow{ID: t.ID, Source: t.Cite(), Text: t.Text, Mutants: t.Mutants, NotCheckable: t.NotCheckable}
		for _, c := range t.Checks {
			ck := evidence.RuleCheck{Name: c, Ran: r.ran[c]}
			if !ck.Ran {
				ck.Why = r.why(c)
			}
			row.Checks = append(row.Checks, ck)
		}
		proven := 0
		for _, m := range t.Mutants {
			if inCard[m] && killed[m] {
				proven++
			}
		}
		row.Proven = proven > 0 && proven == len(t.Mutants)
		sec.Rows = append(sec.Rows, row)
	}
	sec.Count()
	return sec
}

// readMutationCard reads the last mutation card (the JSON `rendermac
// mutate` writes; `make mutate` keeps a copy in docs/mutation-score.json)
// and names it for the card: its date and commit. A missing file is no
// error: the note says none was read.
func readMutationCard(path string) (*evidence.MutationScore, string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Sprintf("none read (%s does not exist; `make mutate` writes it)", path), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("--mutation-card: %w", err)
	}
	var card evidence.Card
	if err := json.Unmarshal(data, &card); err != nil {
		return nil, "", fmt.Errorf("--mutation-card %s: not a card: %w", path, err)
	}
	if card.MutationScore == nil {
		return nil, "", fmt.Errorf("--mutation-card %s: a card without a mutation score", path)
	}
	commit := card.Run.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if card.Run.Dirty {
		commit += " (dirty)"
	}
	return card.MutationScore, fmt.Sprintf("the mutation card of %s, commit %s (%s: %d of %d killed by qualify alone)",
		card.Date, commit, path, card.MutationScore.KilledByQualify, card.MutationScore.Total), nil
}

// runRules is `rendermac rules`: the rule inventory with what checks and
// breaks each rule; --gaps lists only the rules a check or a mutant is
// missing for, and exits 1 when there is one.
func runRules(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("rules", "[--gaps] [--json]", stderr)
	gaps := fs.Bool("gaps", false, "list only the rules no check of qualify or no mutant reaches; exit 1 if there is one")
	asJSON := fs.Bool("json", false, "print the trace as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	trace, err := ruleTrace()
	if err != nil {
		return fmt.Errorf("the rule trace is broken:\n%w", err)
	}
	if *gaps {
		trace = slices.DeleteFunc(trace, func(t contract.RuleTrace) bool {
			return t.NotCheckable != "" || len(t.Checks) > 0 && len(t.Mutants) > 0
		})
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(trace); err != nil {
			return err
		}
	} else {
		t := tablewriter.NewWriter(stdout)
		t.Header("rule", "stated at", "checks", "mutants")
		for _, r := range trace {
			checks := strings.Join(r.Checks, "\n")
			if r.NotCheckable != "" {
				checks = "not checkable here"
			}
			_ = t.Append(r.ID, r.Cite(), checks, strings.Join(r.Mutants, "\n"))
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	if *gaps && len(trace) > 0 {
		fmt.Fprintf(stderr, "rules: %d rules lack a check or a mutant\n", len(trace))
		return exitError{1}
	}
	return nil
}
