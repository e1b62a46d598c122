package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rendermac/rendermac/harness/contract"
	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/harness/mutate"
	"github.com/rendermac/rendermac/harness/qualify"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/s3provider"
)

// parseQualifyFlags reads and checks qualify's flags into the library's
// Config: what runQualify runs and what TestCIMatrixExample holds the
// workflow example to.
func parseQualifyFlags(args []string, stderr io.Writer) (qualify.Config, error) {
	c := qualify.Default()
	fs := newFlagSet("qualify", "[--seeds N] [--out DIR] [--db URL] [--no-timings] [--shard K/N]", stderr)
	fs.IntVar(&c.Seeds, "seeds", c.Seeds, "seeds of the model campaign")
	fs.IntVar(&c.Steps, "steps", c.Steps, "events per model sequence")
	fs.IntVar(&c.PGSeeds, "pg-seeds", c.PGSeeds, "seeds of the model-vs-Postgres campaign (the design paper's size)")
	fs.IntVar(&c.PGSteps, "pg-steps", c.PGSteps, "events per model-vs-Postgres sequence")
	fs.IntVar(&c.StackSeeds, "stack-seeds", c.StackSeeds, "seeds of the model-vs-Postgres-vs-full-stack campaign")
	fs.IntVar(&c.StackSteps, "stack-steps", c.StackSteps, "events per three-way sequence")
	fs.Uint64Var(&c.FirstSeed, "first-seed", c.FirstSeed, "first seed of every campaign")
	fs.IntVar(&c.Workers, "workers", c.Workers, "sequences of the model campaign run in parallel")
	fs.IntVar(&c.PGWorkers, "pg-workers", c.PGWorkers, "sequences of the model-vs-Postgres and three-way campaigns run in "+
		"parallel, each on its own database cloned from the migrated template")
	machineDefault(fs, "workers", "one per CPU")
	machineDefault(fs, "pg-workers", fmt.Sprintf("%d per CPU", targets.WorkersPerCPU))
	fullCompareFlag(fs, &c.FullCompareEvery)
	fs.StringVar(&c.Out, "out", c.Out, "directory for the card (Markdown, JSON, JUnit XML, HTML) and replay files")
	fs.StringVar(&c.DB, "db", os.Getenv("DATABASE_URL"), "Postgres URL (default: DATABASE_URL, else an embedded cluster)")
	variantFlag(fs, &c.ServerVariant, "server-variant", "server-mutation", "qualify a deliberately broken service layer (must fail)")
	variantFlag(fs, &c.ModelVariant, "model-variant", "model-mutation", "qualify a deliberately broken model (must fail)")
	fs.BoolVar(&c.NoScenarios, "no-scenarios", false, "skip the phase-fault scenario catalogue")
	fs.BoolVar(&c.ArtifactsS3, "artifacts-s3", false, "run the three-way stack campaign and the scenario catalogue with artifacts on a real S3 "+
		"server (versitygw, started here; "+s3provider.InstallCommand+" installs it) instead of a directory")
	fs.StringVar(&c.S3Scenarios, "s3-scenarios", c.S3Scenarios, "scenarios (names or globs) run a second time "+
		"with artifacts on a real S3 server when versitygw is found (required under CI=true); \"\" runs none; --artifacts-s3 runs them all there")
	fs.BoolVar(&c.NoFleet, "no-fleet", false, "skip the fleet campaign (server and agent processes under Mac faults; not run with --shard)")
	fs.DurationVar(&c.FleetDuration, "fleet-duration", c.FleetDuration, "load and faults of the fleet campaign (setup and drain come on top)")
	fs.IntVar(&c.Linearize.Rounds, "linearize-rounds", c.Linearize.Rounds, "rounds of the linearizability check: concurrent "+
		"clients against the full stack, each round's history checked with porcupine against the model, job by job (0: skip)")
	fs.Uint64Var(&c.Linearize.Seed, "linearize-seed", c.Linearize.Seed, "seed of the linearizability check's first round")
	fs.StringVar(&c.Scenarios, "scenarios", "", "run only these scenarios: comma-separated names or glob patterns (default: all)")
	fs.Var(&c.Shard, "shard", "run shard `K/N`, the Kth of N contiguous slices of every campaign's seeds (the determinism "+
		"sample too) and of the scenarios; rendermac card merge joins the N cards into the unsharded run's card")
	fs.IntVar(&c.DeterminismSeeds, "determinism-seeds", c.DeterminismSeeds, "seeds of the model campaign run twice, traces compared (0: skip)")
	fs.IntVar(&c.DeterminismPGSeeds, "determinism-pg-seeds", c.DeterminismPGSeeds, "seeds of the model-vs-Postgres campaign run twice, traces compared (0: skip)")
	fs.BoolVar(&c.NoTimings, "no-timings", false, "leave durations out, so two runs of one commit give identical files")
	fs.BoolVar(&c.NoRulesGate, "no-rules-gate", !qualify.RulesGateDefault, "record the rules no check of qualify reaches without failing on them")
	fs.StringVar(&c.MutationCard, "mutation-card", c.MutationCard, "the last mutation card (rendermac mutate's JSON): "+
		"the card's Rules section says which rules it proves")
	fs.BoolVar(&c.NoCoverageGate, "no-coverage-gate", false, "record coverage but do not fail when a required transition, reply or fault "+
		"was never reached (smoke runs too small to reach them all)")
	addWeightFlag(fs, &c.Gen, &c.Weights)
	if err := parseFlags(fs, args); err != nil {
		return c, err
	}
	return c, usage(c.Validate())
}

// usage turns the library's configuration errors into usage errors (exit 2).
func usage(err error) error {
	var ce qualify.ConfigError
	if errors.As(err, &ce) {
		return usageError{ce.Error()}
	}
	return err
}

// mutantRules is the mutation catalogue as the rule trace needs it.
func mutantRules() []qualify.MutantRules {
	out := make([]qualify.MutantRules, len(mutate.Catalogue))
	for i, m := range mutate.Catalogue {
		out[i] = qualify.MutantRules{ID: m.ID, Rules: m.Rules}
	}
	return out
}

// ruleTrace is the contract's rules with the checks of this binary's
// qualify and the mutation catalogue's mutants.
func ruleTrace() ([]contract.RuleTrace, error) { return qualify.RuleTrace(mutantRules()) }

func runQualify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	campaignGC()
	c, err := parseQualifyFlags(args, stderr)
	if err != nil {
		return err
	}
	c.Build, c.Host, c.Command = currentBuild(), hostname(), recordedCommand("qualify", args)
	c.Mutants = mutantRules()
	c.Log, c.Progress = stderr, newProgress(stderr)
	if bin, err := os.Executable(); err == nil {
		c.Bin = bin // else the fleet campaign reports why it has no binary
	}
	card, err := qualify.Run(ctx, c)
	if err != nil {
		return usage(err)
	}
	paths, err := evidence.WriteAll(c.Out, card, evidence.WriteOptions{NoTimings: c.NoTimings})
	if err != nil {
		return err
	}
	verdict := "PASS"
	if !card.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(stdout, "qualification %s: %d campaigns, %d failures\n", verdict, len(card.Campaigns), len(card.Failures))
	for _, fl := range card.Failures {
		source := fl.Source
		if fl.Events != nil || fl.Seed != 0 {
			source = fmt.Sprintf("%s seed %d", fl.Source, fl.Seed)
		}
		fmt.Fprintf(stdout, "  %s: %s\n    replay: %s\n", source, fl.Detail, fl.Replay)
	}
	for _, p := range paths {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	if err := githubActions(card, paths, os.Getenv, stdout); err != nil {
		return err
	}
	if !card.Passed {
		return exitError{1}
	}
	return nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}
