package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"

	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/harness/mutate"
)

// runMutate is `rendermac mutate`: the source mutation campaign. It needs
// the source tree (--src, default the working directory) and a Go
// toolchain, since every mutant is rebuilt.
func runMutate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mutate", "[--src DIR] [--workers N] [--timeout D] [--only ID,...] [--tests] [--out DIR]", stderr)
	src := fs.String("src", ".", "the module's source tree (copied, never changed)")
	workers := fs.Int("workers", max(1, runtime.NumCPU()/2), "mutants run at once, each in its own copy of the tree")
	machineDefault(fs, "workers", "half the CPUs, at least 1")
	timeout := fs.Duration("timeout", 20*time.Minute, "bound on one mutant's build, gate and tests (the gate takes 1.5-6 min on 2 cores, longer under load; a timeout fails the campaign)")
	only := fs.String("only", "", "comma-separated mutant ids to run (default: the whole catalogue)")
	tests := fs.Bool("tests", false, "on a mutant the gate missed, also run the mutated package's tests")
	gate := fs.String("gate", strings.Join(mutate.DefaultQualifyArgs, " "), "the bounded qualify flags each mutant runs")
	out := fs.String("out", "evidence-out", "directory for the mutation card (Markdown, JSON, JUnit XML, HTML)")
	noFocus := fs.Bool("no-focus", false, "run every mutant through the whole gate; by default each first runs the focused gate (only the "+
		"checks that reach its rules, same sizes and seeds) and the whole gate only if that misses it")
	list := fs.Bool("list", false, "list the catalogue and exit")
	record := fs.String("record", "", "also write the JSON card to FILE when the whole catalogue ran (make mutate: docs/mutation-score.json, "+
		"which qualify's card reads for its Rules section)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *list {
		t := tablewriter.NewWriter(stdout)
		t.Header("id", "kind", "file", "what")
		for _, m := range mutate.Catalogue {
			_ = t.Append(m.ID, m.Kind, m.File, m.What)
		}
		return t.Render()
	}
	root, err := filepath.Abs(*src)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return usageError{fmt.Sprintf("--src %s is not the module root (no go.mod): mutate rebuilds the source", root)}
	}
	mutants := mutate.Catalogue
	if *only != "" {
		mutants = nil
		for id := range strings.SplitSeq(*only, ",") {
			i := indexMutant(id)
			if i < 0 {
				return usageError{fmt.Sprintf("--only: unknown mutant %q (see rendermac mutate --list)", id)}
			}
			mutants = append(mutants, mutate.Catalogue[i])
		}
	}
	var checks func(mutate.Mutant) []string
	if !*noFocus {
		if checks, err = mutantChecks(); err != nil {
			return err
		}
	}
	start := time.Now()
	fmt.Fprintf(stderr, "mutate: %d mutants, %d at a time, timeout %s each, gate: qualify %s\n", len(mutants), *workers, *timeout, *gate)
	score, err := mutate.Run(ctx, mutate.Options{Root: root, Mutants: mutants, Workers: *workers, Timeout: *timeout,
		QualifyArgs: strings.Fields(*gate), Tests: *tests, Progress: stderr, Checks: checks})
	if err != nil {
		return err
	}
	wall := time.Since(start)
	card := evidence.Card{Title: "Source mutation campaign", Date: start.UTC().Format("2006-01-02"), MutationScore: &score}
	card.Run = evidence.RunInfo{Build: currentBuild(), Host: hostname(), Command: recordedCommand("mutate", args),
		DurationMs: wall.Milliseconds()}
	// The card is the one gate: a mutant only package tests kill is a
	// gap in qualify, and fails the campaign as a survivor does.
	for _, m := range score.Mutants {
		switch {
		case m.Outcome == "survived":
			card.Failures = append(card.Failures, evidence.Failure{Source: "mutant " + m.ID, Detail: "survived: " + m.What,
				Replay: "go run ./cmd/rendermac mutate --only " + m.ID + " --tests"})
		case m.Outcome == "timeout":
			card.Failures = append(card.Failures, evidence.Failure{Source: "mutant " + m.ID,
				Detail: "timed out (" + m.Detail + "): no evidence that qualify catches it: " + m.What,
				Replay: "go run ./cmd/rendermac mutate --only " + m.ID + " --timeout 40m"})
		case m.Outcome == "killed" && !m.ByQualify():
			card.Failures = append(card.Failures, evidence.Failure{Source: "mutant " + m.ID,
				Detail: "killed by package tests only, not by qualify: " + m.What,
				Replay: "go run ./cmd/rendermac mutate --only " + m.ID})
		}
	}
	card.Failures = append(card.Failures, mutantRuleFailures(score, *only == "")...)
	card.Passed = len(card.Failures) == 0
	paths, err := evidence.WriteAll(*out, card, evidence.WriteOptions{})
	if err != nil {
		return err
	}
	for _, table := range []func(evidence.MutationScore) ([]string, [][]string){evidence.MutantRows, evidence.PackageRows} {
		header, rows := table(score)
		t := tablewriter.NewWriter(stdout)
		t.Header(header)
		for _, r := range rows {
			_ = t.Append(r)
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "mutation score: %d/%d killed (%.1f%%), %d by qualify alone\n", score.Killed, score.Total, score.Score(), score.KilledByQualify)
	if *record != "" && *only == "" {
		for _, p := range paths {
			if strings.HasSuffix(p, "-mutation-score.json") {
				data, err := os.ReadFile(p)
				if err == nil {
					err = os.WriteFile(*record, data, 0o644)
				}
				if err != nil {
					return fmt.Errorf("--record: %w", err)
				}
				paths = append(paths, *record)
			}
		}
	}
	for _, p := range paths {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	fmt.Fprintf(stderr, "mutate: wall time %s\n", wall.Round(time.Second))
	if !card.Passed {
		return exitError{1}
	}
	return nil
}

// mutantChecks gives each mutant the checks of qualify that reach the
// rules it names (the rule trace), for mutate's focused first gate.
func mutantChecks() (func(mutate.Mutant) []string, error) {
	trace, err := ruleTrace()
	if err != nil {
		return nil, fmt.Errorf("the rule trace, which the focused gate needs (--no-focus runs without it): %w", err)
	}
	byRule := map[string][]string{}
	for _, t := range trace {
		byRule[t.ID] = t.Checks
	}
	return func(m mutate.Mutant) []string {
		var out []string
		for _, r := range m.Rules {
			for _, c := range byRule[r] {
				if !slices.Contains(out, c) {
					out = append(out, c)
				}
			}
		}
		return out
	}, nil
}

func indexMutant(id string) int {
	for i, m := range mutate.Catalogue {
		if m.ID == strings.TrimSpace(id) {
			return i
		}
	}
	return -1
}

// mutantRuleFailures holds the catalogue to the contract: with the whole
// catalogue run (whole), a rule no mutant breaks is a failure (nothing
// shows that qualify would notice it broken), unless no check can reach
// it (contract.NotCheckable); and a rule one of whose mutants was not
// killed by qualify alone is one, whatever ran.
func mutantRuleFailures(score evidence.MutationScore, whole bool) []evidence.Failure {
	var out []evidence.Failure
	trace, err := ruleTrace()
	if err != nil {
		return []evidence.Failure{{Source: "rules", Detail: err.Error(), Replay: rulesReplay}}
	}
	byID := map[string]evidence.Mutant{}
	for _, m := range score.Mutants {
		byID[m.ID] = m
	}
	for _, t := range trace {
		if t.NotCheckable != "" {
			continue
		}
		if len(t.Mutants) == 0 {
			if whole {
				out = append(out, evidence.Failure{Source: "rule " + t.ID,
					Detail: fmt.Sprintf("no mutant breaks rule %s (%s): nothing shows qualify would notice it broken", t.ID, t.Cite()),
					Replay: rulesReplay})
			}
			continue
		}
		for _, id := range t.Mutants {
			m, ran := byID[id]
			if ran && m.Outcome != "invalid" && !m.ByQualify() {
				out = append(out, evidence.Failure{Source: "rule " + t.ID,
					Detail: fmt.Sprintf("rule %s (%s): its mutant %s was not killed by qualify alone (%s)", t.ID, t.Cite(), id, m.Outcome),
					Replay: "go run ./cmd/rendermac mutate --only " + id})
			}
		}
	}
	return out
}
