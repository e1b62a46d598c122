package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/qualify"
	"github.com/rendermac/rendermac/internal/s3provider"
	"github.com/rendermac/rendermac/internal/shard"
)

type fuzzFlags struct {
	// t is the campaign's target: what runs, broken how, its sizes and
	// the generator's weights.
	t               qualify.Target
	replay          string
	seeds           int
	seed, firstSeed uint64
	progress, force bool
	shard           shard.Spec
}

func runFuzz(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	campaignGC()
	var f fuzzFlags
	fs := newFlagSet("fuzz", "--target model|both|stack [--seeds N --steps M [--shard K/N] | --seed S | --replay FILE]", stderr)
	fs.StringVar(&f.t.Target, "target", "model", "what to run against: model; both (model and Postgres, compared step by step); "+
		"or stack (model, Postgres and the full stack: HTTP API, WebSocket gateways, device sessions)")
	fs.IntVar(&f.seeds, "seeds", 100, "number of seeds to run (first-seed, first-seed+1, ...)")
	fs.IntVar(&f.t.Steps, "steps", 200, "events per sequence")
	fs.Uint64Var(&f.seed, "seed", 0, "run this one seed only (replays a reported failure)")
	fs.Uint64Var(&f.firstSeed, "first-seed", 1, "first seed of the campaign")
	fs.IntVar(&f.t.Workers, "workers", 0, "sequences run in parallel (default: one per CPU with --target model; "+
		"four per CPU against Postgres, each on its own database cloned from the migrated template)")
	fs.StringVar(&f.replay, "replay", "", "replay a sequence file written by an earlier failure")
	fullCompareFlag(fs, &f.t.FullEvery)
	variantFlag(fs, &f.t.Variant, "variant", "mutation", "run a deliberately broken variant (proves the checks can fail): "+
		strings.Join(qualify.ModelVariantNames(), ", "))
	fs.StringVar(&f.t.OutDir, "failures", "rendermac-failures", "directory for shrunk failing sequences")
	fs.BoolVar(&f.t.S3, "artifacts-s3", false, "with --target stack: artifacts in a bucket of a real S3 server (versitygw, started here; "+
		s3provider.InstallCommand+" installs it) instead of a directory")
	fs.StringVar(&f.t.DB, "db", os.Getenv("DATABASE_URL"), "Postgres URL for --target both and stack (default: DATABASE_URL, else an embedded cluster)")
	fs.BoolVar(&f.progress, "progress", false, "show progress (seeds done/total, rate, ETA) on stderr when it is a terminal, as qualify does")
	fs.BoolVar(&f.force, "force", false, "with --replay: run a file another build (commit, schema, model, generator) wrote")
	addWeightFlag(fs, &f.t.Gen, &f.t.Weights)
	fs.Var(&f.shard, "shard", "run shard `K/N`, the Kth of N contiguous slices of the --seeds seeds (a failure's replay command needs no --shard)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.seeds < 1 || f.t.Steps < 1 || f.t.Workers < 0 || f.t.FullEvery < 1 {
		return usageError{"--seeds, --steps, --workers and --full-compare-every must be at least 1"}
	}
	if err := f.t.Gen.Validate(); err != nil {
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
		rf, f.t.Target, f.t.Variant = &r, r.Target, r.Variant
	}
	if f.t.Workers == 0 {
		f.t.Workers = qualify.DefaultWorkers(f.t.Target)
	}
	f.t.Build = currentBuild()
	fac, cleanup, err := f.t.Open(ctx, stderr)
	if err != nil {
		return usage(err)
	}
	defer cleanup()
	if rf != nil {
		return replaySequence(ctx, f.t.Target, fac, *rf, stdout)
	}
	seeds := qualify.ShardSeeds(f.firstSeed, f.seeds, f.shard)
	if f.seed != 0 {
		seeds = qualify.Seeds{Total: 1, First: f.seed, List: []uint64{f.seed}}
	}
	c := fuzz.Campaign{Factory: fac.Factory, Options: fac.Options, Gen: f.t.Gen, Seeds: seeds.List,
		Steps: f.t.Steps, Workers: f.t.Workers, Tokens: qualify.TokenRule()}
	var prog *progress // nil: no progress; a nil *progress ignores updates
	if f.progress {
		prog = newProgress(stderr)
		c.Progress = func(done, total int) { prog.Update("fuzz "+f.t.Target, done, total) }
	}
	sharded := ""
	if f.shard.Sharded() {
		sharded = fmt.Sprintf(" shard=%s (of %d seeds from %d)", f.shard, seeds.Total, f.firstSeed)
	}
	fmt.Fprintf(stderr, "fuzz: target=%s seeds=%d first=%d steps=%d workers=%d variant=%q weights=%q%s\n",
		f.t.Target, len(seeds.List), seeds.First, f.t.Steps, f.t.Workers, f.t.Variant, f.t.Gen.WeightsString(), sharded)
	start := time.Now()
	res, err := c.Run(ctx)
	prog.Done("fuzz " + f.t.Target)
	if err != nil {
		return err
	}
	printCampaign(stdout, f.t.Target, res)
	wall := time.Since(start)
	fmt.Fprintf(stderr, "fuzz: wall time %s (%.0f steps/s)\n", wall.Round(time.Millisecond), float64(res.Steps)/wall.Seconds())
	for _, fl := range f.t.TokenFailures("fuzz", res.TokenProblems) {
		fmt.Fprintf(stdout, "\nFAIL seed %d: %s\nreplay: %s\n", fl.Seed, fl.Detail, fl.Replay)
	}
	if len(res.Failures) == 0 {
		if len(res.TokenProblems) > 0 {
			return exitError{1}
		}
		return nil
	}
	return reportFailure(stdout, f.t, res.Failures[0])
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
	if miss := qualify.CardCoverage(res.Coverage).Unreached(); len(miss) > 0 {
		fmt.Fprintf(w, "coverage: %d required cells never reached: %s\n", len(miss), strings.Join(miss, ", "))
	} else {
		fmt.Fprintln(w, "coverage: every required transition, reply and fault was reached")
	}
}

func reportFailure(w io.Writer, t qualify.Target, sf fuzz.SeedFailure) error {
	fmt.Fprintf(w, "\nFAIL seed %d: %s\n", sf.Seed, sf.Result.Failure)
	fmt.Fprintf(w, "replay the whole run:  %s\n", t.Command(fmt.Sprintf("--seed %d --steps %d", sf.Seed, t.Steps)))
	if sf.Shrunk != nil {
		fmt.Fprintf(w, "\nshrunk to %d events (%s):\n", len(sf.Shrunk.Events), sf.ShrunkRes.Failure)
		for i, ev := range sf.Shrunk.Events {
			fmt.Fprintf(w, "  %3d  %s\n", i, ev)
		}
		path, err := t.WriteFailure(*sf.Shrunk)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "replay the shrunk run: %s\n", t.Command("--replay "+path))
	}
	return exitError{1}
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

func replaySequence(ctx context.Context, target string, fac qualify.Setup, rf fuzz.ReplayFile, stdout io.Writer) error {
	res, err := fuzz.Run(ctx, fac.Factory, 0, rf.Seq, fac.Options)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "replayed %d events of seed %d against %s\n", res.Steps, rf.Seq.Seed, target)
	if res.Failure != nil {
		fmt.Fprintf(stdout, "FAIL: %s\n", res.Failure)
		return exitError{1}
	}
	fmt.Fprintln(stdout, "ok: no divergence, no violation")
	return nil
}
