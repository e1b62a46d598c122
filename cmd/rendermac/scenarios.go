package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/rendermac/rendermac/harness/scenarios"
	"github.com/rendermac/rendermac/harness/targets"
)

type scenariosFlags struct {
	list, names, timeline, log bool
	artifactsS3                bool
	run, db, variant           string
}

// runScenarios lists or runs the named phase-fault scenario catalogue
// against the full stack (gateway, service layer, Postgres, WebSocket agent
// identities, HTTP buyers) and exits 1 if any scenario fails.
func runScenarios(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f scenariosFlags
	fs := newFlagSet("scenarios", "[--list [--names]] [--run NAME[,NAME...]] [--db URL] [--variant V] [--timeline]", stderr)
	fs.BoolVar(&f.list, "list", false, "list the catalogue (name, fault, phase, expected outcome, broken variants) and exit")
	fs.BoolVar(&f.names, "names", false, "with --list: only the names, one a line (for scripts)")
	fs.StringVar(&f.run, "run", "", "run only these scenarios: comma-separated names or glob patterns (default: all)")
	fs.StringVar(&f.db, "db", os.Getenv("DATABASE_URL"), "Postgres URL (default: DATABASE_URL, else an embedded cluster)")
	variantFlag(fs, &f.variant, "variant", "mutation", "run against a deliberately broken variant (scenarios must fail): "+
		strings.Join(scenarios.VariantNames(), ", "))
	fs.BoolVar(&f.timeline, "timeline", false, "print every scenario's agent/gateway/database timeline")
	fs.BoolVar(&f.log, "log", false, "copy the gateways' log lines to stderr")
	fs.BoolVar(&f.artifactsS3, "artifacts-s3", false, "artifacts in a bucket of a real S3 server (a versitygw process per scenario, "+
		"which the step store down stops) with presigned grants, instead of a directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	list, err := scenarios.Select(f.run)
	if err != nil {
		return usageError{err.Error()}
	}
	if f.names && !f.list {
		return usageError{"--names only goes with --list"}
	}
	if f.list && f.names {
		for _, s := range list {
			fmt.Fprintln(stdout, s.Name)
		}
		return nil
	}
	if f.list {
		printCatalogue(stdout, list)
		return nil
	}
	opts, err := scenarios.VariantOptions(f.variant)
	if err != nil {
		return usageError{err.Error()}
	}
	if f.log {
		opts.Log = stderr
	}
	opts.ArtifactsS3 = f.artifactsS3
	pg, err := targets.OpenPostgres(ctx, f.db, stderr)
	if err != nil {
		return err
	}
	defer pg.Close()
	env, err := scenarios.NewEnv(ctx, pg, opts)
	if err != nil {
		return err
	}
	defer env.Close()
	if f.variant != "" {
		fmt.Fprintf(stderr, "scenarios: against broken variant %s (%s): every scenario it breaks must FAIL\n",
			f.variant, scenarios.DescribeVariant(f.variant))
	}
	start := time.Now()
	var results []scenarios.Result
	var skipped []scenarios.Scenario
	for _, s := range list {
		if s.Runnable() != nil {
			skipped = append(skipped, s)
			continue
		}
		res := scenarios.RunScenario(ctx, env, s)
		fmt.Fprintf(stderr, "scenario %-30s %s (%s)\n", s.Name, verdict(res), res.Duration.Round(time.Millisecond))
		results = append(results, res)
		if ctx.Err() != nil {
			break
		}
	}
	printResults(stdout, results)
	if f.timeline {
		printTimelines(stdout, results)
	}
	failed := 0
	for _, r := range results {
		if !r.Passed {
			failed++
			fmt.Fprintf(stdout, "\nFAIL %s: %v\n", r.Name, r.Err)
		}
	}
	fmt.Fprintf(stdout, "\n%d scenarios, %d passed, %d failed in %s\n", len(results), len(results)-failed, failed,
		time.Since(start).Round(time.Millisecond))
	for _, s := range skipped {
		fmt.Fprintf(stdout, "not run: %s: %v\n", s.Name, s.Runnable())
	}
	if failed > 0 {
		return exitError{1}
	}
	return nil
}

func verdict(r scenarios.Result) string {
	if r.Passed {
		return "PASS"
	}
	return "FAIL"
}

func newScenarioTable(w io.Writer) *tablewriter.Table {
	return tablewriter.NewTable(w, tablewriter.WithRowAutoWrap(tw.WrapNormal), tablewriter.WithRowMaxWidth(36))
}

func printCatalogue(w io.Writer, list []scenarios.Scenario) {
	t := newScenarioTable(w)
	t.Header("name", "fault", "phase", "expected", "broken by", "needs")
	for _, s := range list {
		broken := strings.Join(s.BrokenBy, ", ")
		if broken == "" {
			broken = "(proposed) " + s.Proposed
		}
		_ = t.Append(s.Name, s.Fault, s.Phase, s.Expected, broken, strings.Join(s.Needs, ", "))
	}
	_ = t.Render()
}

func printResults(w io.Writer, results []scenarios.Result) {
	t := newScenarioTable(w)
	t.Header("name", "fault", "phase", "expected", "observed", "verdict", "duration")
	for _, r := range results {
		_ = t.Append(r.Name, r.Fault, r.Phase, r.Expected, r.Observed, verdict(r), r.Duration.Round(time.Millisecond).String())
	}
	_ = t.Render()
}

func printTimelines(w io.Writer, results []scenarios.Result) {
	for _, r := range results {
		fmt.Fprintf(w, "\n%s (%s):\n", r.Name, verdict(r))
		for _, e := range r.Timeline {
			fmt.Fprintf(w, "  %3d  %-8s  %s\n", e.Step, e.Lane, e.Label)
		}
	}
}
