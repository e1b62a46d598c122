package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/rendermac/rendermac/harness/contract"
	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/harness/fleet"
	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/scenarios"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/s3provider"
	"github.com/rendermac/rendermac/internal/shard"
	"github.com/rendermac/rendermac/internal/syncbuf"
)

type qualifyFlags struct {
	seeds, steps, pgSeeds, pgSteps, workers int
	pgWorkers, fullEvery                    int
	stackSeeds, stackSteps                  int
	detSeeds, detPgSeeds                    int
	firstSeed                               uint64
	out, db, serverVariant, modelVariant    string
	scenarios                               string
	noTimings, noScenarios, noCoverageGate  bool
	artifactsS3                             bool
	s3Scenarios                             string
	noFleet                                 bool
	noRulesGate                             bool
	mutationCard                            string
	fleetDuration                           time.Duration
	gen                                     fuzz.GenConfig
	weights                                 []string
	shard                                   shard.Spec
}

// invariants is SPEC section 4, as the card states it.
var invariants = []evidence.Invariant{
	{Number: 1, Text: "At most one live attempt per job; attempt numbers are 1..n without gaps."},
	{Number: 2, Text: "A terminal job has no live attempt."},
	{Number: 3, Text: "A job reaches succeeded only through verifying, from a fenced commit of a non-expired attempt; never from cancelling."},
	{Number: 4, Text: "Every status change is allowed by the tables; the journal replays to the rows."},
	{Number: 5, Text: "attempt_number <= max_attempts; no requeue past the budget or the deadline."},
	{Number: 6, Text: "Stored token hashes are 64 hex chars, distinct per attempt, never a plaintext."},
	{Number: 7, Text: "A terminal job has exactly one settled hold and one terminal webhook; money is conserved."},
	{Number: 8, Text: "A succeeded job's output is at its attempt's key with the recorded size and SHA-256."},
	{Number: 9, Text: "A device's occupied slots equal its live attempts."},
}

// notCovered is what this qualification does not stand for.
var notCovered = []string{
	"Fuzz campaigns inject faults only at the protocol level (perturbed identities, duplicated and reordered frames, clock jumps); infrastructure faults (Postgres restarts, TCP cuts, gateway kills, store outages) are covered by the named scenarios, one path each, and by the fleet campaign, once or twice each.",
	"The fleet campaign is short (about half a minute of load, a few agents, each fault kind once or twice) and its FFmpeg share small; the 10-minute, 8-agent run is `rendermac fleet --duration 10m --agents 8`, not part of qualify.",
	"Exactly-once physical execution, which RenderMac does not promise: a provider may finish encoding after its lease is lost.",
	"The fleet campaign's Patroni cluster loses its primary once by a kill and once by a switchover, on one machine's loopback: no network partition, no lagging disk, no managed service's own failover; the 10-minute run with more of each is `rendermac fleet --postgres patroni --duration 10m`.",
}

// parseQualifyFlags reads and checks qualify's flags: what runQualify runs
// and what TestCIMatrixExample holds the workflow example to.
func parseQualifyFlags(args []string, stderr io.Writer) (qualifyFlags, error) {
	var f qualifyFlags
	fs := newFlagSet("qualify", "[--seeds N] [--out DIR] [--db URL] [--no-timings] [--shard K/N]", stderr)
	fs.IntVar(&f.seeds, "seeds", 500, "seeds of the model campaign")
	fs.IntVar(&f.steps, "steps", 200, "events per model sequence")
	fs.IntVar(&f.pgSeeds, "pg-seeds", 500, "seeds of the model-vs-Postgres campaign (the design paper's size)")
	fs.IntVar(&f.pgSteps, "pg-steps", 100, "events per model-vs-Postgres sequence")
	fs.IntVar(&f.stackSeeds, "stack-seeds", 200, "seeds of the model-vs-Postgres-vs-full-stack campaign")
	fs.IntVar(&f.stackSteps, "stack-steps", 60, "events per three-way sequence")
	fs.Uint64Var(&f.firstSeed, "first-seed", 1, "first seed of every campaign")
	fs.IntVar(&f.workers, "workers", runtime.NumCPU(), "sequences of the model campaign run in parallel")
	fs.IntVar(&f.pgWorkers, "pg-workers", defaultWorkers("both"), "sequences of the model-vs-Postgres and three-way campaigns run in "+
		"parallel, each on its own database cloned from the migrated template")
	machineDefault(fs, "workers", "one per CPU")
	machineDefault(fs, "pg-workers", fmt.Sprintf("%d per CPU", targets.WorkersPerCPU))
	fullCompareFlag(fs, &f.fullEvery)
	fs.StringVar(&f.out, "out", "evidence-out", "directory for the card (Markdown, JSON, JUnit XML, HTML) and replay files")
	fs.StringVar(&f.db, "db", os.Getenv("DATABASE_URL"), "Postgres URL (default: DATABASE_URL, else an embedded cluster)")
	variantFlag(fs, &f.serverVariant, "server-variant", "server-mutation", "qualify a deliberately broken service layer (must fail)")
	variantFlag(fs, &f.modelVariant, "model-variant", "model-mutation", "qualify a deliberately broken model (must fail)")
	fs.BoolVar(&f.noScenarios, "no-scenarios", false, "skip the phase-fault scenario catalogue")
	fs.BoolVar(&f.artifactsS3, "artifacts-s3", false, "run the three-way stack campaign and the scenario catalogue with artifacts on a real S3 "+
		"server (versitygw, started here; "+s3provider.InstallCommand+" installs it) instead of a directory")
	fs.StringVar(&f.s3Scenarios, "s3-scenarios", strings.Join(defaultS3Scenarios, ","), "scenarios (names or globs) run a second time "+
		"with artifacts on a real S3 server when versitygw is found (required under CI=true); \"\" runs none; --artifacts-s3 runs them all there")
	fs.BoolVar(&f.noFleet, "no-fleet", false, "skip the fleet campaign (server and agent processes under Mac faults; not run with --shard)")
	fs.DurationVar(&f.fleetDuration, "fleet-duration", qualifyFleet.Duration, "load and faults of the fleet campaign (setup and drain come on top)")
	fs.StringVar(&f.scenarios, "scenarios", "", "run only these scenarios: comma-separated names or glob patterns (default: all)")
	fs.Var(&f.shard, "shard", "run shard `K/N`, the Kth of N contiguous slices of every campaign's seeds (the determinism "+
		"sample too) and of the scenarios; rendermac card merge joins the N cards into the unsharded run's card")
	fs.IntVar(&f.detSeeds, "determinism-seeds", 20, "seeds of the model campaign run twice, traces compared (0: skip)")
	fs.IntVar(&f.detPgSeeds, "determinism-pg-seeds", 3, "seeds of the model-vs-Postgres campaign run twice, traces compared (0: skip)")
	fs.BoolVar(&f.noTimings, "no-timings", false, "leave durations out, so two runs of one commit give identical files")
	fs.BoolVar(&f.noRulesGate, "no-rules-gate", !rulesGateDefault, "record the rules no check of qualify reaches without failing on them")
	fs.StringVar(&f.mutationCard, "mutation-card", "docs/mutation-score.json", "the last mutation card (rendermac mutate's JSON): "+
		"the card's Rules section says which rules it proves")
	fs.BoolVar(&f.noCoverageGate, "no-coverage-gate", false, "record coverage but do not fail when a required transition, reply or fault "+
		"was never reached (smoke runs too small to reach them all)")
	addWeightFlag(fs, &f.gen, &f.weights)
	if err := parseFlags(fs, args); err != nil {
		return f, err
	}
	if err := f.gen.Validate(); err != nil {
		return f, usageError{"--weight: " + err.Error()}
	}
	if f.seeds < 1 || f.steps < 1 || f.pgSeeds < 0 || f.pgSteps < 1 || f.stackSeeds < 0 || f.stackSteps < 1 || f.workers < 1 ||
		f.pgWorkers < 1 || f.fullEvery < 1 {
		return f, usageError{"--seeds, --steps, --pg-steps, --stack-steps, --workers, --pg-workers and --full-compare-every must be at least 1, " +
			"--pg-seeds and --stack-seeds at least 0"}
	}
	if _, err := scenarios.VariantOptions(f.serverVariant); err != nil {
		return f, usageError{"--server-variant: " + err.Error()}
	}
	if _, err := scenarios.Select(f.scenarios); err != nil {
		return f, usageError{"--scenarios: " + err.Error()}
	}
	if f.s3Scenarios != "" {
		if _, err := scenarios.Select(f.s3Scenarios); err != nil {
			return f, usageError{"--s3-scenarios: " + err.Error()}
		}
	}
	return f, nil
}

func runQualify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	campaignGC()
	f, err := parseQualifyFlags(args, stderr)
	if err != nil {
		return err
	}
	start := time.Now()
	card := evidence.Card{Title: "Phase-fault qualification", Date: start.UTC().Format("2006-01-02"),
		Invariants: invariants, NotCovered: notCovered, NoTimings: f.noTimings}
	card.Run = evidence.RunInfo{Build: currentBuild(), Host: hostname(),
		Command: recordedCommand("qualify", args), FirstSeed: f.firstSeed, GeneratorWeights: f.gen.WeightsString(),
		Shard: f.shard.String()}
	prog := newProgress(stderr)
	if f.shard.Sharded() {
		fmt.Fprintf(stderr, "qualify: shard %s: a slice of every campaign's seeds and of the scenarios\n", f.shard)
	}

	if f.artifactsS3 || f.s3Scenarios != "" {
		card.NotCovered = append(card.NotCovered, notCoveredOnS3)
	}
	qualifyContract(&card, stderr)
	// The fleet campaign runs its own server, agents, Postgres and object
	// store as processes, and most of its minute is wall time (load at a
	// fixed rate, faults on a timer, the drain), so it runs beside the
	// campaigns and scenarios rather than after them; its section, notes
	// and failures join the card at the end, where they were before.
	var fleetCard evidence.Card
	var waitFleet func() error // nil: no fleet campaign
	if !f.noFleet && !f.shard.Sharded() {
		stderr = &syncbuf.Writer{W: stderr}
		fleetCtx, cancelFleet := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- qualifyFleetCampaign(fleetCtx, &fleetCard, f, stderr) }()
		waitFleet = sync.OnceValue(func() error { return <-done })
		defer func() {
			cancelFleet()
			_ = waitFleet() // on an early return, its processes are stopped first
		}()
	}
	// The scenarios, too, mostly wait (on frames, timers, restarts: about
	// a third of one CPU alone), so they run beside the campaigns, on their
	// own Postgres, into their own card, which joins this one where the
	// scenarios' results were before: after the campaigns'.
	var scenarioCard evidence.Card
	var notRun []string            // notes of scenarios not run
	var waitScenarios func() error // nil: no scenarios
	if !f.noScenarios {
		scenarioCtx, cancelScenarios := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			pg := &scenarioPostgres{db: f.db}
			defer pg.close()
			// The notes of scenarios not run come after the notes every
			// shard shares, as card merge orders them (evidence.Merge), so
			// a sharded run's merged card and the unsharded card agree.
			err := qualifyScenarios(scenarioCtx, &scenarioCard, &notRun, f, pg, f.scenarios, f.artifactsS3, prog)
			if err == nil {
				err = qualifyS3Scenarios(scenarioCtx, &scenarioCard, &notRun, f, pg, prog)
			}
			done <- err
		}()
		waitScenarios = sync.OnceValue(func() error { return <-done })
		defer func() {
			cancelScenarios()
			_ = waitScenarios()
		}()
	}
	model := fuzzFlags{target: "model", variant: f.modelVariant, workers: f.workers, steps: f.steps, outDir: filepath.Join(f.out, "replays"),
		gen: f.gen, weights: f.weights}
	gate := !f.noCoverageGate
	if err := qualifyCampaign(ctx, &card, "model", model, shardSeeds(f.firstSeed, f.seeds, f.shard), gate, prog, stderr); err != nil {
		return err
	}
	if err := qualifyDeterminism(ctx, &card, "model", model, shardSeeds(f.firstSeed, min(f.detSeeds, f.seeds), f.shard), stderr); err != nil {
		return err
	}
	if f.pgSeeds > 0 {
		both := fuzzFlags{target: "both", variant: f.serverVariant, db: f.db, workers: f.pgWorkers, fullEvery: f.fullEvery, steps: f.pgSteps, outDir: filepath.Join(f.out, "replays"),
			gen: f.gen, weights: f.weights}
		if err := qualifyCampaign(ctx, &card, "model-vs-postgres", both, shardSeeds(f.firstSeed, f.pgSeeds, f.shard), gate, prog, stderr); err != nil {
			return err
		}
		if err := qualifyDeterminism(ctx, &card, "model-vs-postgres", both, shardSeeds(f.firstSeed, min(f.detPgSeeds, f.pgSeeds), f.shard), stderr); err != nil {
			return err
		}
	}
	if f.stackSeeds > 0 {
		stack := fuzzFlags{target: "stack", variant: f.serverVariant, db: f.db, workers: f.pgWorkers, fullEvery: f.fullEvery, steps: f.stackSteps, outDir: filepath.Join(f.out, "replays"),
			gen: f.gen, weights: f.weights, s3: f.artifactsS3}
		if err := qualifyCampaign(ctx, &card, "model-vs-postgres-vs-stack", stack, shardSeeds(f.firstSeed, f.stackSeeds, f.shard), gate, prog, stderr); err != nil {
			return err
		}
	}
	if waitScenarios != nil {
		if err := waitScenarios(); err != nil {
			return err
		}
		card.Scenarios = scenarioCard.Scenarios
		card.Failures = append(card.Failures, scenarioCard.Failures...)
		card.NotCovered = append(card.NotCovered, scenarioCard.NotCovered...)
		card.NotCovered = append(card.NotCovered, notRun...)
	}
	if waitFleet != nil {
		if err := waitFleet(); err != nil {
			return err
		}
		card.NotCovered = append(card.NotCovered, fleetCard.NotCovered...)
		card.Failures = append(card.Failures, fleetCard.Failures...)
		card.Fleet = fleetCard.Fleet
	}
	if err := qualifyRules(&card, f); err != nil {
		return err
	}
	card.Passed = len(card.Failures) == 0
	if !f.noTimings {
		card.Run.DurationMs = time.Since(start).Milliseconds()
	}
	paths, err := evidence.WriteAll(f.out, card, evidence.WriteOptions{NoTimings: f.noTimings})
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

// contractReplay reruns the contract check alone.
const contractReplay = "go test -count=1 -run TestProtocolAgreesWithContract ./harness/contract/"

// qualifyContract compares protocol's tables with the contract's text (the
// embedded docs/SPEC.md and docs/semantics.md) and records every table on
// the card; a table protocol disagrees on, or whose text cannot be read, is
// a failure. It runs in every shard (it is cheap and has no seeds); card
// merge keeps its failures once.
func qualifyContract(card *evidence.Card, stderr io.Writer) {
	for _, r := range contract.CheckEmbedded() {
		card.Contract = append(card.Contract, evidence.ContractCheck{Table: r.Table, Source: r.Source,
			Contract: r.Contract, Passed: r.Passed(), Detail: r.Detail})
		if !r.Passed() {
			fmt.Fprintf(stderr, "qualify: contract FAIL: %s (%s): %s\n", r.Table, r.Source, r.Detail)
			card.Failures = append(card.Failures, evidence.Failure{Source: evidence.ContractSource,
				Detail: fmt.Sprintf("%s (%s): %s", r.Table, r.Source, r.Detail), Replay: contractReplay})
		}
	}
}

// qualifyCampaign runs one campaign over its seeds (this shard's slice) and
// records it (and its first failure, shrunk, with a replay file) on the
// card, with its coverage; with gate, a required cell it never reached
// fails it. A shard whose slice is empty still records the campaign's row,
// with no seeds, so that every shard's card has the same rows.
func qualifyCampaign(ctx context.Context, card *evidence.Card, name string, f fuzzFlags, seeds seedSlice,
	gate bool, prog *progress, stderr io.Writer) error {
	var res fuzz.CampaignResult
	start := time.Now() // reset once the target is set up: the row times the seeds only
	if len(seeds.list) > 0 {
		setup, cleanup, err := fuzzFactory(ctx, f, stderr)
		if err != nil {
			return fmt.Errorf("%s campaign: %w", name, err)
		}
		defer cleanup()
		if f.target != "model" && card.Run.PostgresVersion == "" {
			card.Run.PostgresKind, card.Run.PostgresVersion = setup.pgKind, setup.pgVersion
		}
		c := fuzz.Campaign{Factory: setup.factory, Options: setup.options, Gen: f.gen, Seeds: seeds.list,
			Steps: f.steps, Workers: f.workers, Progress: func(done, total int) { prog.update(name, done, total) },
			Tokens: tokenRule()}
		start = time.Now()
		res, err = c.Run(ctx)
		prog.done(name)
		if err != nil {
			return fmt.Errorf("%s campaign: %w", name, err)
		}
	}
	camp := evidence.Campaign{Name: name, Target: f.target, ArtifactStore: campaignStore(f), Seeds: len(seeds.list), FirstSeed: seeds.first, StepsPerSeq: f.steps,
		Sequences: res.Seeds, Steps: res.Steps, Replies: res.Codes, Divergences: res.Divergences(),
		Violations: res.Violations(), Errors: res.Errors(), Passed: len(res.Failures) == 0,
		Coverage: cardCoverage(res.Coverage), TokensChecked: res.TokensChecked}
	camp.Passed = camp.Passed && len(res.TokenProblems) == 0
	if !card.NoTimings {
		camp.DurationMs = time.Since(start).Milliseconds()
	}
	// The coverage gate: a required transition, reply or fault the campaign
	// never reached fails it, named on the card and on stderr. A shard
	// leaves the gate to card merge, which sums the shards' coverage.
	camp.Coverage.Gate = gate
	covFail, missed := evidence.CoverageFailure(name, *camp.Coverage)
	missed = missed && gate && card.Run.Shard == ""
	if missed {
		camp.Passed = false
		fmt.Fprintf(stderr, "qualify: coverage gate FAIL: %s: %s\n", name, covFail.Detail)
	}
	card.Campaigns = append(card.Campaigns, camp)
	for i, sf := range res.Failures {
		fl := evidence.Failure{Source: name, Seed: sf.Seed, Detail: sf.Result.Failure.String(), Target: f.target, Variant: f.variant,
			Replay: fuzzCommand(f, fmt.Sprintf("--seed %d --steps %d", sf.Seed, f.steps))}
		if i == 0 && sf.Shrunk != nil {
			path, err := writeFailure(f, *sf.Shrunk)
			if err != nil {
				return err
			}
			fl.Detail = sf.ShrunkRes.Failure.String()
			fl.Replay = fuzzCommand(f, "--replay "+path)
			for _, ev := range sf.Shrunk.Events {
				fl.Events = append(fl.Events, ev.String())
			}
		}
		card.Failures = append(card.Failures, fl)
	}
	card.Failures = append(card.Failures, tokenFailures(name, f, res.TokenProblems)...)
	if missed {
		card.Failures = append(card.Failures, covFail)
	}
	return nil
}

// qualifyDeterminism runs seeds of a campaign (this shard's slice of the
// sample) twice each and records, as a campaign row "determinism: NAME",
// whether every step's replies and rows hashed the same both times; a seed
// that did not is a failure naming the first differing step. No sample, no
// row; a shard with an empty slice of a sample records the row with none.
func qualifyDeterminism(ctx context.Context, card *evidence.Card, name string, f fuzzFlags, seeds seedSlice, stderr io.Writer) error {
	if seeds.total <= 0 {
		return nil
	}
	var diffs []fuzz.Nondeterminism
	start := time.Now() // reset once the target is set up, as for campaigns
	if len(seeds.list) > 0 {
		setup, cleanup, err := fuzzFactory(ctx, f, stderr)
		if err != nil {
			return fmt.Errorf("determinism %s: %w", name, err)
		}
		defer cleanup()
		start = time.Now()
		diffs, err = fuzz.CheckDeterminism(ctx, setup.factory, setup.options, f.gen, seeds.list, f.steps)
		if err != nil {
			return fmt.Errorf("determinism %s: %w", name, err)
		}
	}
	n := len(seeds.list)
	camp := evidence.Campaign{Name: "determinism: " + name, Target: f.target, Seeds: n, FirstSeed: seeds.first,
		StepsPerSeq: f.steps, Sequences: 2 * n, Steps: 2 * n * f.steps, Divergences: len(diffs), Passed: len(diffs) == 0}
	if !card.NoTimings {
		camp.DurationMs = time.Since(start).Milliseconds()
	}
	card.Campaigns = append(card.Campaigns, camp)
	for _, d := range diffs {
		card.Failures = append(card.Failures, evidence.Failure{Source: "determinism: " + name, Seed: d.Seed,
			Detail: d.String() + " (run the replay command twice and compare)", Target: f.target, Variant: f.variant,
			Replay: fuzzCommand(f, fmt.Sprintf("--seed %d --steps %d", d.Seed, f.steps))})
	}
	return nil
}

// seedSlice is this shard's part of a campaign's seeds: total seeds from
// the campaign's first, of which list (starting at first) is the slice.
type seedSlice struct {
	total int
	first uint64
	list  []uint64
}

// shardSeeds slices the seeds first..first+total-1 for sh (all of them for
// the whole run).
func shardSeeds(first uint64, total int, sh shard.Spec) seedSlice {
	lo, hi := sh.Range(total)
	s := seedSlice{total: total, first: first + uint64(lo), list: make([]uint64, 0, hi-lo)}
	for i := lo; i < hi; i++ {
		s.list = append(s.list, first+uint64(i))
	}
	return s
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}

// raceCount matches the measured share of a race scenario's rounds.
var raceCount = regexp.MustCompile(`\([1-9][0-9]* during verification\)`)

// qualifyScenarios runs the phase-fault catalogue against the full stack and
// records every scenario (and each failure with its replay command).
// scenarioPostgres is the Postgres both scenario runs share (on the
// directory store, then on S3), opened on first use: starting a cluster
// costs more than most scenarios.
type scenarioPostgres struct {
	db string
	pg *targets.Postgres
}

func (s *scenarioPostgres) get(ctx context.Context) (*targets.Postgres, error) {
	if s.pg == nil {
		pg, err := targets.OpenPostgres(ctx, s.db, io.Discard)
		if err != nil {
			return nil, fmt.Errorf("scenarios: %w", err)
		}
		s.pg = pg
	}
	return s.pg, nil
}

func (s *scenarioPostgres) close() {
	if s.pg != nil {
		_ = s.pg.Close() // the run's results are in; a failed stop changes none
	}
}

func qualifyScenarios(ctx context.Context, card *evidence.Card, notRun *[]string, f qualifyFlags, pgs *scenarioPostgres, names string,
	onS3 bool, prog *progress) error {
	opts, err := scenarios.VariantOptions(f.serverVariant)
	if err != nil {
		return usageError{err.Error()}
	}
	opts.ArtifactsS3 = onS3
	list, err := scenarios.Select(names)
	if err != nil {
		return usageError{"--scenarios: " + err.Error()}
	}
	phase := "scenarios"
	if onS3 && !f.artifactsS3 {
		phase = "scenarios on S3"
	}
	lo, hi := f.shard.Range(len(list))
	if list = list[lo:hi]; len(list) == 0 {
		return nil
	}
	pg, err := pgs.get(ctx)
	if err != nil {
		return err
	}
	env, err := scenarios.NewEnv(ctx, pg, opts)
	if err != nil {
		return fmt.Errorf("scenarios: %w", err)
	}
	defer env.Close()
	for i, s := range list {
		if why := s.Runnable(); why != nil {
			*notRun = append(*notRun, evidence.SkippedNote(s.Name, why))
			continue
		}
		res := scenarios.RunScenario(ctx, env, s)
		prog.update(phase, i+1, len(list))
		ev := res.Evidence(f.noTimings)
		if onS3 {
			ev.ArtifactStore = "s3"
		}
		if f.noTimings {
			// How lanes interleave and how many of a race's rounds landed in
			// which window are timing too; a deterministic card leaves them out.
			ev.Timeline = nil
			ev.Observed = raceCount.ReplaceAllString(ev.Observed, "(at least one during verification)")
		}
		card.Scenarios = append(card.Scenarios, ev)
		if !res.Passed {
			replay := "go run -tags faultpoints ./cmd/rendermac scenarios --run " + s.Name
			if f.serverVariant != "" {
				replay = "go run -tags faultpoints,mutations ./cmd/rendermac scenarios --run " + s.Name + " --variant " + f.serverVariant
			}
			if onS3 {
				replay += " --artifacts-s3"
			}
			card.Failures = append(card.Failures, evidence.Failure{Source: "scenario " + ev.Key(),
				Detail: fmt.Sprint(res.Err), Replay: replay})
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	prog.done(phase)
	return nil
}

// defaultS3Scenarios are the scenarios qualify runs again on S3 by
// default: the ones whose outcome depends on the artifact store (the
// object-store outage against the real server process, PUTs of other
// bytes to a claimed output key, which the bucket refuses, and every kind
// of grant, which the bucket presigns and checks, with the sealed copies
// it serves).
var defaultS3Scenarios = []string{"artifact_store_outage", "late_upload_after_commit", "upload_after_claim", "upload_during_verification",
	"grant_kinds"}

// qualifyS3Scenarios runs --s3-scenarios with artifacts on S3, unless the
// whole catalogue already ran there (--artifacts-s3) or the list is empty.
// Without versitygw it records what was not run, or fails under CI=true,
// which installs it (.ci/setup).
func qualifyS3Scenarios(ctx context.Context, card *evidence.Card, notRun *[]string, f qualifyFlags, pgs *scenarioPostgres, prog *progress) error {
	if f.artifactsS3 || f.s3Scenarios == "" {
		return nil
	}
	if _, err := s3provider.Find(); err != nil {
		if os.Getenv("CI") == "true" {
			return fmt.Errorf("scenarios on S3 (--s3-scenarios): %w", err)
		}
		card.NotCovered = append(card.NotCovered, fmt.Sprintf("Scenarios on S3 (%s) were not run: %v.", f.s3Scenarios, err))
		return nil
	}
	if err := qualifyScenarios(ctx, card, notRun, f, pgs, f.s3Scenarios, true, prog); err != nil {
		return err
	}
	card.NotCovered = append(card.NotCovered, fmt.Sprintf("On S3 only the scenarios %s ran (entries @s3); the rest of the catalogue "+
		"and the three-way campaign ran with artifacts in a directory (`qualify --artifacts-s3` runs them all on S3).", f.s3Scenarios))
	return nil
}

// notCoveredOnS3 is what no qualify run covers on S3, with or without
// --artifacts-s3.
const notCoveredOnS3 = "On S3: a full or refusing bucket (artifact_store_full injects its fault in the control plane's store, which " +
	"the agent's presigned PUT does not pass through); the campaign's upload op goes through the control plane's artifact handler, not " +
	"a presigned PUT to the bucket (the scenarios make those); the bucket's create-only check was run against versitygw only."

// campaignStore is where a campaign's artifacts live, for the card: the
// stack target's store; "" for targets without one.
func campaignStore(f fuzzFlags) string {
	switch {
	case f.target != "stack":
		return ""
	case f.s3:
		return "s3"
	}
	return "fs"
}

// qualifyFleet is qualify's fleet campaign: bounded (about half a minute of
// load, a minute in all), every fault kind at least once.
var qualifyFleet = fleet.Config{Duration: 25 * time.Second, Seed: 1, Agents: 3, Gateways: 2, Rate: 3,
	FaultEvery: 500 * time.Millisecond, DrainBound: fleet.Defaults.DrainBound, FFmpegPercent: 5}

// qualifyFleetCampaign runs the fleet campaign with this binary and puts
// its Fleet section, and a failure per violated check, on the card.
func qualifyFleetCampaign(ctx context.Context, card *evidence.Card, f qualifyFlags, stderr io.Writer) error {
	cfg := qualifyFleet
	cfg.Duration = f.fleetDuration
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.Bin = bin
	cfg.KeepOnFailure = true
	switch perr := fleet.PatroniAvailable(); {
	case perr == nil:
		cfg.Postgres = fleet.PostgresPatroni
	case os.Getenv("CI") == "true":
		return fmt.Errorf("fleet campaign: the Patroni cluster is required under CI=true: %w", perr)
	default:
		card.NotCovered = append(card.NotCovered, "The fleet campaign ran on one local Postgres (no primary kill, no switchover): "+perr.Error()+".")
	}
	fmt.Fprintf(stderr, "qualify: fleet campaign (%s of load, %d agents, %d gateways, postgres %s)\n", cfg.Duration, cfg.Agents,
		cfg.Gateways, cfg.Postgres)
	rep, err := fleet.Run(ctx, cfg)
	if err != nil {
		return fmt.Errorf("fleet campaign: %w", err)
	}
	if rep.StoreNote != "" {
		card.NotCovered = append(card.NotCovered, "The fleet campaign's object-store outage: "+rep.StoreNote+".")
	}
	sec := &evidence.Fleet{Command: fleetReplay(cfg), Agents: cfg.Agents, Gateways: cfg.Gateways, Store: rep.Store, Transport: rep.Transport,
		LoadMs: cfg.Duration.Milliseconds(), WastedMs: rep.WastedTotal().Milliseconds(),
		DrainMs: rep.DrainTime.Milliseconds(), DrainBoundMs: rep.DrainBound.Milliseconds(), Violations: []string{}}
	for _, k := range fleet.FaultKinds() {
		sec.Faults = append(sec.Faults, evidence.Count{Name: k, N: rep.Faults[k], Note: rep.NotInjected(k)})
	}
	sec.Postgres = rep.PostgresLabel()
	for _, l := range rep.PrimaryLosses {
		out := l.Outage().Milliseconds()
		if l.FirstCommit.IsZero() {
			out = -1
		}
		sec.PrimaryLosses = append(sec.PrimaryLosses, evidence.PrimaryLoss{Kind: l.Kind, From: l.From, To: l.To, OutageMs: out})
	}
	sec.Jobs = []evidence.Count{{Name: "accepted", N: int(rep.Accepted)}, {Name: "succeeded", N: rep.Soak.Succeeded},
		{Name: "cancelled", N: rep.Soak.Cancelled}, {Name: "failed", N: rep.Soak.Failed}}
	for _, c := range rep.AllChecks() {
		if c.ID != "" {
			sec.Checks = append(sec.Checks, c.ID)
		}
		for _, v := range c.Violations {
			sec.Violations = append(sec.Violations, c.Name+": "+v)
		}
		if len(c.Violations) > 0 {
			detail := c.Name + ": " + strings.Join(c.Violations, "; ")
			if rep.Dir != "" {
				detail += " (process logs kept in " + rep.Dir + ")"
			}
			card.Failures = append(card.Failures, evidence.Failure{Source: "fleet", Detail: detail,
				Replay: fleetReplay(cfg)})
		}
	}
	card.Fleet = sec
	return nil
}

// rulesGateDefault is whether qualify fails on a rule of the contract no
// check reaches (--no-rules-gate turns it off). On since every rule of
// the inventory has a check (issue 46).
const rulesGateDefault = true

// rulesReplay lists the rule trace and its gaps.
const rulesReplay = "go run -tags faultpoints,mutations ./cmd/rendermac rules --gaps"

// qualifyRules puts the Rules section on the card: every rule of the
// contract, the checks of this run that reached it and the last mutation
// card's proof; a broken trace, and (with the rules gate) a rule no check
// reaches, is a failure.
func qualifyRules(card *evidence.Card, f qualifyFlags) error {
	trace, err := ruleTrace()
	if err != nil {
		card.Failures = append(card.Failures, evidence.Failure{Source: "rules", Detail: err.Error(), Replay: rulesReplay})
	}
	score, note, err := readMutationCard(f.mutationCard)
	if err != nil {
		return usageError{err.Error()}
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
	card.Rules = ruleSection(trace, newRanChecks(*card, f, fleetChecks, notRun), score, note)
	if f.noRulesGate {
		return nil
	}
	for _, row := range card.Rules.Rows {
		if len(row.Checks) == 0 && row.NotCheckable == "" {
			card.Failures = append(card.Failures, evidence.Failure{Source: "rules",
				Detail: fmt.Sprintf("rule %s (%s) has no check in qualify: %s", row.ID, row.Source, row.Text), Replay: rulesReplay})
		}
	}
	return nil
}
