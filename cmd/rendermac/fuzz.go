package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/model"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/s3provider"
	"github.com/rendermac/rendermac/internal/shard"
	"github.com/rendermac/rendermac/server/fencing"
)

type fuzzFlags struct {
	target, variant, replay, outDir, db string
	seeds, steps, workers               int
	// fullEvery is K, the whole-projection compare interval (0: default).
	fullEvery       int
	seed, firstSeed uint64
	progress, force bool
	// s3 puts the stack target's artifacts on a real S3 server (versitygw).
	s3 bool
	// gen is the generator's config; weights the --weight settings that
	// made it, repeated in replay commands.
	gen     fuzz.GenConfig
	weights []string
	shard   shard.Spec
}

func runFuzz(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	campaignGC()
	var f fuzzFlags
	fs := newFlagSet("fuzz", "--target model|both|stack [--seeds N --steps M [--shard K/N] | --seed S | --replay FILE]", stderr)
	fs.StringVar(&f.target, "target", "model", "what to run against: model; both (model and Postgres, compared step by step); "+
		"or stack (model, Postgres and the full stack: HTTP API, WebSocket gateways, device sessions)")
	fs.IntVar(&f.seeds, "seeds", 100, "number of seeds to run (first-seed, first-seed+1, ...)")
	fs.IntVar(&f.steps, "steps", 200, "events per sequence")
	fs.Uint64Var(&f.seed, "seed", 0, "run this one seed only (replays a reported failure)")
	fs.Uint64Var(&f.firstSeed, "first-seed", 1, "first seed of the campaign")
	fs.IntVar(&f.workers, "workers", 0, "sequences run in parallel (default: one per CPU with --target model; "+
		"four per CPU against Postgres, each on its own database cloned from the migrated template)")
	fs.StringVar(&f.replay, "replay", "", "replay a sequence file written by an earlier failure")
	fullCompareFlag(fs, &f.fullEvery)
	variantFlag(fs, &f.variant, "variant", "mutation", "run a deliberately broken variant (proves the checks can fail): "+
		strings.Join(modelVariantNames(), ", "))
	fs.StringVar(&f.outDir, "failures", "rendermac-failures", "directory for shrunk failing sequences")
	fs.BoolVar(&f.s3, "artifacts-s3", false, "with --target stack: artifacts in a bucket of a real S3 server (versitygw, started here; "+
		s3provider.InstallCommand+" installs it) instead of a directory")
	fs.StringVar(&f.db, "db", os.Getenv("DATABASE_URL"), "Postgres URL for --target both and stack (default: DATABASE_URL, else an embedded cluster)")
	fs.BoolVar(&f.progress, "progress", false, "show progress (seeds done/total, rate, ETA) on stderr when it is a terminal, as qualify does")
	fs.BoolVar(&f.force, "force", false, "with --replay: run a file another build (commit, schema, model, generator) wrote")
	addWeightFlag(fs, &f.gen, &f.weights)
	fs.Var(&f.shard, "shard", "run shard `K/N`, the Kth of N contiguous slices of the --seeds seeds (a failure's replay command needs no --shard)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.seeds < 1 || f.steps < 1 || f.workers < 0 || f.fullEvery < 1 {
		return usageError{"--seeds, --steps, --workers and --full-compare-every must be at least 1"}
	}
	if err := f.gen.Validate(); err != nil {
		return usageError{"--weight: " + err.Error()}
	}
	if f.shard.Sharded() && (f.seed != 0 || f.replay != "") {
		return usageError{"--shard slices a --seeds campaign; it does not go with --seed or --replay"}
	}
	var rf *fuzz.ReplayFile
	if f.replay != "" {
		r, err := readReplay(f.replay)
		if err != nil {
			return err
		}
		if err := checkProvenance(f.replay, r.Build, f.force, stderr); err != nil {
			return err
		}
		// The file says what it failed against; run it the same way.
		rf, f.target, f.variant = &r, r.Target, r.Variant
	}
	if f.workers == 0 {
		f.workers = defaultWorkers(f.target)
	}
	fac, cleanup, err := fuzzFactory(ctx, f, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	if rf != nil {
		return replaySequence(ctx, f, fac, *rf, stdout)
	}
	seeds := shardSeeds(f.firstSeed, f.seeds, f.shard)
	if f.seed != 0 {
		seeds = seedSlice{total: 1, first: f.seed, list: []uint64{f.seed}}
	}
	c := fuzz.Campaign{Factory: fac.factory, Options: fac.options, Gen: f.gen, Seeds: seeds.list,
		Steps: f.steps, Workers: f.workers, Tokens: tokenRule()}
	var prog *progress // nil: no progress; a nil *progress ignores updates
	if f.progress {
		prog = newProgress(stderr)
		c.Progress = func(done, total int) { prog.update("fuzz "+f.target, done, total) }
	}
	sharded := ""
	if f.shard.Sharded() {
		sharded = fmt.Sprintf(" shard=%s (of %d seeds from %d)", f.shard, seeds.total, f.firstSeed)
	}
	fmt.Fprintf(stderr, "fuzz: target=%s seeds=%d first=%d steps=%d workers=%d variant=%q weights=%q%s\n",
		f.target, len(seeds.list), seeds.first, f.steps, f.workers, f.variant, f.gen.WeightsString(), sharded)
	start := time.Now()
	res, err := c.Run(ctx)
	prog.done("fuzz " + f.target)
	if err != nil {
		return err
	}
	printCampaign(stdout, f.target, res)
	wall := time.Since(start)
	fmt.Fprintf(stderr, "fuzz: wall time %s (%.0f steps/s)\n", wall.Round(time.Millisecond), float64(res.Steps)/wall.Seconds())
	for _, fl := range tokenFailures("fuzz", f, res.TokenProblems) {
		fmt.Fprintf(stdout, "\nFAIL seed %d: %s\nreplay: %s\n", fl.Seed, fl.Detail, fl.Replay)
	}
	if len(res.Failures) == 0 {
		if len(res.TokenProblems) > 0 {
			return exitError{1}
		}
		return nil
	}
	return reportFailure(stdout, f, res.Failures[0])
}

// defaultWorkers is --workers' default for a target.
func defaultWorkers(target string) int {
	if target == "model" {
		return runtime.NumCPU()
	}
	return targets.WorkersPerCPU * runtime.NumCPU()
}

// fullCompareFlag is --full-compare-every, shared by fuzz and qualify.
func fullCompareFlag(fs *flag.FlagSet, k *int) {
	fs.IntVar(k, "full-compare-every", fuzz.DefaultFullCompareEvery, "K: the differential campaigns compare the targets' whole "+
		"projected rows after every Kth step and the last, and after the other steps the rows the step could have touched "+
		"(docs/semantics.md, \"Campaign comparisons\"); 1 compares the whole projection after every step")
}

func printCampaign(w io.Writer, target string, res fuzz.CampaignResult) {
	t := tablewriter.NewWriter(w)
	t.Header("target", "seeds", "steps", "violations", "divergences", "errors")
	_ = t.Append(target, res.Seeds, res.Steps, res.Violations(), res.Divergences(), res.Errors())
	_ = t.Render()
	// Replies by code (lease_conflict by reason) with their share of all
	// replies: the generator's distribution.
	replies := res.Coverage.Replies
	var total int64
	for _, n := range replies {
		total += n
	}
	codes := tablewriter.NewWriter(w)
	codes.Header("reply", "count", "share")
	for _, k := range slices.Sorted(maps.Keys(replies)) {
		_ = codes.Append(k, replies[k], fmt.Sprintf("%.1f%%", 100*float64(replies[k])/float64(max(total, 1))))
	}
	_ = codes.Append("(ticks, sweeps)", fmt.Sprintf("%d, %d", res.Codes["tick"], res.Codes["sweep"]), "")
	_ = codes.Render()
	fl := tablewriter.NewWriter(w)
	phases := fuzz.FaultPhaseNames()
	fl.Header(append([]string{"fault", "count"}, phases...))
	for _, k := range slices.Sorted(maps.Keys(res.Coverage.Faults)) {
		row := []any{k, res.Coverage.Faults[k]}
		for _, p := range phases {
			row = append(row, res.Coverage.FaultPhases[k+"@"+p])
		}
		_ = fl.Append(row...)
	}
	_ = fl.Render()
	if miss := cardCoverage(res.Coverage).Unreached(); len(miss) > 0 {
		fmt.Fprintf(w, "coverage: %d required cells never reached: %s\n", len(miss), strings.Join(miss, ", "))
	} else {
		fmt.Fprintln(w, "coverage: every required transition, reply and fault was reached")
	}
}

func reportFailure(w io.Writer, f fuzzFlags, sf fuzz.SeedFailure) error {
	fmt.Fprintf(w, "\nFAIL seed %d: %s\n", sf.Seed, sf.Result.Failure)
	fmt.Fprintf(w, "replay the whole run:  %s\n", fuzzCommand(f, fmt.Sprintf("--seed %d --steps %d", sf.Seed, f.steps)))
	if sf.Shrunk != nil {
		fmt.Fprintf(w, "\nshrunk to %d events (%s):\n", len(sf.Shrunk.Events), sf.ShrunkRes.Failure)
		for i, ev := range sf.Shrunk.Events {
			fmt.Fprintf(w, "  %3d  %s\n", i, ev)
		}
		path, err := writeFailure(f, *sf.Shrunk)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "replay the shrunk run: %s\n", fuzzCommand(f, "--replay "+path))
	}
	return exitError{1}
}

func fuzzCommand(f fuzzFlags, rest string) string {
	cmd := "go run ./cmd/rendermac fuzz --target " + f.target
	if f.variant != "" {
		if f.target != "model" { // a server variant exists only with -tags mutations
			cmd = "go run -tags mutations ./cmd/rendermac fuzz --target " + f.target
		}
		cmd += " --variant " + f.variant
	}
	for _, w := range f.weights {
		cmd += " --weight " + w
	}
	if f.fullEvery != fuzz.DefaultFullCompareEvery && f.fullEvery != 0 {
		cmd += fmt.Sprintf(" --full-compare-every %d", f.fullEvery)
	}
	return cmd + " " + rest
}

func writeFailure(f fuzzFlags, seq fuzz.Sequence) (string, error) {
	if err := os.MkdirAll(f.outDir, 0o755); err != nil {
		return "", fmt.Errorf("write failure: %w", err)
	}
	path := filepath.Join(f.outDir, fmt.Sprintf("%s-seed-%d.txt", f.target, seq.Seed))
	file, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("write failure: %w", err)
	}
	defer file.Close()
	if err := fuzz.WriteReplay(file, fuzz.ReplayFile{Target: f.target, Variant: f.variant, Build: currentBuild(),
		Weights: f.gen.WeightsString(), Seq: seq}); err != nil {
		return "", fmt.Errorf("write failure %s: %w", path, err)
	}
	return path, file.Close()
}

func readReplay(path string) (fuzz.ReplayFile, error) {
	file, err := os.Open(path)
	if err != nil {
		return fuzz.ReplayFile{}, usageError{err.Error()}
	}
	defer file.Close()
	rf, err := fuzz.ReadReplay(file)
	if err != nil {
		return rf, usageError{fmt.Sprintf("%s: %v", path, err)}
	}
	return rf, nil
}

func replaySequence(ctx context.Context, f fuzzFlags, fac fuzzSetup, rf fuzz.ReplayFile, stdout io.Writer) error {
	res, err := fuzz.Run(ctx, fac.factory, 0, rf.Seq, fac.options)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "replayed %d events of seed %d against %s\n", res.Steps, rf.Seq.Seed, f.target)
	if res.Failure != nil {
		fmt.Fprintf(stdout, "FAIL: %s\n", res.Failure)
		return exitError{1}
	}
	fmt.Fprintln(stdout, "ok: no divergence, no violation")
	return nil
}

// fuzzSetup is what a campaign needs from its target choice.
type fuzzSetup struct {
	factory           fuzz.Factory
	options           fuzz.Options
	pgKind, pgVersion string
}

// modelVariantNames are the model's broken variants, the values --variant
// takes with --target model.
func modelVariantNames() []string {
	return []string{string(model.VariantCommitFromCancelling), string(model.VariantNoEpochCheck),
		string(model.VariantRequeuePastBudget), string(model.VariantKeepSlot), string(model.VariantWithdrawCharged)}
}

func fuzzFactory(ctx context.Context, f fuzzFlags, stderr io.Writer) (fuzzSetup, func(), error) {
	switch f.target {
	case "model":
		if f.variant != "" && !slices.Contains(modelVariantNames(), f.variant) {
			return fuzzSetup{}, nil, usageError{fmt.Sprintf("unknown model --variant %q (want one of %s)", f.variant, strings.Join(modelVariantNames(), ", "))}
		}
		mut := model.Variant(f.variant)
		return fuzzSetup{factory: func(_ context.Context, _ int, seed uint64) ([]fuzz.Target, error) {
			return []fuzz.Target{fuzz.NewModelTarget(seed, mut)}, nil
		}}, func() {}, nil
	case "both", "stack":
		return postgresFactory(ctx, f, stderr)
	}
	return fuzzSetup{}, nil, usageError{fmt.Sprintf("unknown --target %q (want model, both or stack)", f.target)}
}

// postgresFactory runs the model and the Postgres service layer side by
// side (--target both), and for --target stack the full stack as a third
// target. --variant breaks the service layer, never the model; with
// --target stack only the full stack's, so that the failure shows the
// stack driver catching it.
func postgresFactory(ctx context.Context, f fuzzFlags, stderr io.Writer) (fuzzSetup, func(), error) {
	var names []string
	for _, m := range targets.ServerVariants() {
		names = append(names, string(m))
	}
	if f.variant != "" && !slices.Contains(names, f.variant) {
		if len(names) == 0 {
			return fuzzSetup{}, nil, usageError{fmt.Sprintf("server --variant %q: %v", f.variant, fencing.ErrNoVariants)}
		}
		return fuzzSetup{}, nil, usageError{fmt.Sprintf("unknown server --variant %q (want one of %s)", f.variant, strings.Join(names, ", "))}
	}
	pg, err := targets.OpenPostgres(ctx, f.db, stderr)
	if err != nil {
		return fuzzSetup{}, nil, err
	}
	pgVariant := fencing.Variant(f.variant)
	if f.target == "stack" {
		pgVariant = fencing.VariantNone
	}
	workers, err := targets.NewPostgresWorkers(ctx, f.workers, pgVariant, pg.NewWorkerDatabase)
	if err != nil {
		_ = pg.Close()
		return fuzzSetup{}, nil, err
	}
	cleanup := func() {
		workers.Close()
		_ = pg.Close()
	}
	factory := workers.Factory("")
	if f.target == "stack" {
		stack, err := targets.NewStackWorkers(ctx, f.workers, fencing.Variant(f.variant), pg.NewWorkerDatabase)
		if err != nil {
			cleanup()
			return fuzzSetup{}, nil, err
		}
		pgCleanup := cleanup
		cleanup = func() {
			stack.Close()
			pgCleanup()
		}
		if f.s3 {
			srv, err := s3provider.Open(ctx, s3provider.Options{})
			if err != nil {
				cleanup()
				return fuzzSetup{}, nil, err
			}
			stack.S3 = srv
			stackCleanup := cleanup
			cleanup = func() {
				stackCleanup()
				_ = srv.Close()
			}
		}
		factory = targets.ThreeWayFactory(workers, stack)
	}
	opts := fuzz.Options{Outputs: targets.SyntheticOutput, CompareState: true, FullCompareEvery: f.fullEvery}
	version, _ := pg.Provider.Version(ctx)
	return fuzzSetup{factory: factory, options: opts, pgKind: pg.Provider.Kind(), pgVersion: version}, cleanup, nil
}
