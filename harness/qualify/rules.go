package qualify

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/rendermac/rendermac/harness/contract"
	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/harness/fleet"
	"github.com/rendermac/rendermac/harness/scenarios"
	"github.com/rendermac/rendermac/internal/s3provider"
)

// MutantRules is one mutant of the mutation catalogue and the rules it
// breaks: what the rule trace needs of the catalogue, which qualify does
// not import (harness/mutate runs qualify's binary).
type MutantRules struct {
	ID    string
	Rules []string
}

// RulesGateDefault is whether qualify fails on a rule of the contract no
// check reaches (NoRulesGate turns it off). On since every rule of the
// inventory has a check (issue 46).
const RulesGateDefault = true

// RulesReplay lists the rule trace and its gaps.
const RulesReplay = "go run -tags faultpoints,mutations ./cmd/rendermac rules --gaps"

// RuleTrace is the contract's rules with the checks of qualify that reach
// them (contract.Traced and the scenario catalogue's headers) and the
// mutants that break them; an error names every dangling rule id and every
// check name qualify cannot run.
func RuleTrace(mutants []MutantRules) ([]contract.RuleTrace, error) {
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
	for _, m := range mutants {
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

// campaigns are the campaigns qualify runs, by card name.
var campaigns = []string{"model", "model-vs-postgres", "model-vs-postgres-vs-stack"}

// knownChecks is every check name qualify can run (contract.Traced's
// vocabulary).
func knownChecks() map[string]bool {
	known := map[string]bool{"campaign-tokens": true, LinearizeCheck: true}
	for _, c := range campaigns {
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

// checkRules puts the Rules section on the card: every rule of the
// contract, the checks of this run that reached it and the last mutation
// card's proof; a broken trace, and (with the rules gate) a rule no check
// reaches, is a failure.
func checkRules(card *evidence.Card, c Config) error {
	trace, err := RuleTrace(c.Mutants)
	if err != nil {
		card.Failures = append(card.Failures, evidence.Failure{Source: "rules", Detail: err.Error(), Replay: RulesReplay})
	}
	score, note, err := ReadMutationCard(c.MutationCard)
	if err != nil {
		return ConfigError{err.Error()}
	}
	notRun := map[string]string{}
	for _, s := range scenarios.Catalogue() {
		if why := s.Runnable(); why != nil {
			notRun[s.Name] = why.Error()
		}
	}
	if _, err := s3provider.Find(); err != nil {
		notRun["@s3"] = "versitygw not found"
	}
	var fleetChecks []string
	if card.Fleet != nil {
		fleetChecks = card.Fleet.Checks
	}
	card.Rules = ruleSection(trace, newRanChecks(*card, c, fleetChecks, notRun), score, note)
	if c.NoRulesGate {
		return nil
	}
	for _, row := range card.Rules.Rows {
		if len(row.Checks) == 0 && row.NotCheckable == "" {
			card.Failures = append(card.Failures, evidence.Failure{Source: "rules",
				Detail: fmt.Sprintf("rule %s (%s) has no check in qualify: %s", row.ID, row.Source, row.Text), Replay: RulesReplay})
		}
	}
	return nil
}

// ranChecks is what one qualify run ran, read off its card, and why the
// rest did not run, from its config.
type ranChecks struct {
	ran map[string]bool
	c   Config
	// notRun holds the scenarios that could not run here, with why.
	notRun map[string]string
}

// newRanChecks reads what ran off card.
func newRanChecks(card evidence.Card, c Config, fleetChecks []string, notRunnable map[string]string) ranChecks {
	r := ranChecks{ran: map[string]bool{}, c: c, notRun: notRunnable}
	for _, cp := range card.Campaigns {
		if cp.Sequences > 0 && !strings.HasPrefix(cp.Name, "determinism:") {
			r.ran["campaign:"+cp.Name] = true
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
	if l := card.Linearizability; l != nil && l.Rounds > 0 {
		r.ran[LinearizeCheck] = true
	}
	return r
}

// why says why check did not run in this run.
func (r ranChecks) why(check string) string {
	kind, name, _ := strings.Cut(check, ":")
	switch kind {
	case "campaign", "campaign-tokens":
		switch {
		case name == "model-vs-postgres" && r.c.PGSeeds == 0:
			return "--pg-seeds 0"
		case name == "model-vs-postgres-vs-stack" && r.c.StackSeeds == 0:
			return "--stack-seeds 0"
		case r.c.Shard.Sharded():
			return "shard " + r.c.Shard.String() + " holds none of its seeds"
		}
		return "the campaign did not run"
	case LinearizeCheck:
		switch {
		case r.c.Linearize.Rounds == 0:
			return "--linearize-rounds 0"
		case r.c.Shard.Sharded():
			return "shard " + r.c.Shard.String() + " holds none of its rounds"
		}
		return "the check did not run"
	case "scenario":
		base, s3 := strings.CutSuffix(name, "@s3")
		switch {
		case r.c.NoScenarios:
			return "--no-scenarios"
		case r.notRun[base] != "":
			return r.notRun[base]
		case s3 && r.notRun["@s3"] != "":
			return r.notRun["@s3"]
		case s3 && !r.c.ArtifactsS3:
			if list, err := scenarios.Select(r.c.S3Scenarios); err != nil || !slices.ContainsFunc(list, func(s scenarios.Scenario) bool { return s.Name == base }) {
				return "not in --s3-scenarios"
			}
		}
		if list, err := scenarios.Select(r.c.Scenarios); err == nil && !slices.ContainsFunc(list, func(s scenarios.Scenario) bool { return s.Name == base }) {
			return "not selected by --scenarios"
		}
		if r.c.Shard.Sharded() {
			return "in another shard than " + r.c.Shard.String()
		}
		return "the scenario did not run"
	case "fleet":
		switch {
		case r.c.NoFleet:
			return "--no-fleet"
		case r.c.Shard.Sharded():
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

// ReadMutationCard reads the last mutation card (the JSON `rendermac
// mutate` writes; `make mutate` keeps a copy in docs/mutation-score.json)
// and names it for the card: its date and commit. A missing file is no
// error: the note says none was read.
func ReadMutationCard(path string) (*evidence.MutationScore, string, error) {
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
