package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/olekukonko/tablewriter"

	"github.com/rendermac/rendermac/harness/contract"
)

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
