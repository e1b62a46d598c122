package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
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
	timeout := fs.Duration("timeout", 20*time.Minute, "bound on one mutant's build, gate and tests (the gate takes 1.5-6 min on 2 cores, longer under load; a timeout fails the campaign)")
	only := fs.String("only", "", "comma-separated mutant ids to run (default: the whole catalogue)")
	tests := fs.Bool("tests", false, "on a mutant the gate missed, also run the mutated package's tests")
	gate := fs.String("gate", strings.Join(mutate.DefaultQualifyArgs, " "), "the bounded qualify flags each mutant runs")
	out := fs.String("out", "evidence-out", "directory for the mutation card (Markdown, JSON, JUnit XML, HTML)")
	list := fs.Bool("list", false, "list the catalogue and exit")
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
	start := time.Now()
	fmt.Fprintf(stderr, "mutate: %d mutants, %d at a time, timeout %s each, gate: qualify %s\n", len(mutants), *workers, *timeout, *gate)
	score, err := mutate.Run(ctx, mutate.Options{Root: root, Mutants: mutants, Workers: *workers, Timeout: *timeout,
		QualifyArgs: strings.Fields(*gate), Tests: *tests, Progress: stderr})
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
	for _, p := range paths {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	fmt.Fprintf(stderr, "mutate: wall time %s\n", wall.Round(time.Second))
	if !card.Passed {
		return exitError{1}
	}
	return nil
}

func indexMutant(id string) int {
	for i, m := range mutate.Catalogue {
		if m.ID == strings.TrimSpace(id) {
			return i
		}
	}
	return -1
}
