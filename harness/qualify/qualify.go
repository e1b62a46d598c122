// Package qualify is the release gate as a library: Run runs the
// qualification (the contract tables, the seeded differential campaigns
// and their determinism samples, the phase-fault scenarios, the fleet
// campaign, the linearizability check of the full stack's concurrent
// histories and the rule inventory) and returns the evidence card. `rendermac qualify`
// parses its flags into a Config, calls Run and writes and prints the card.
package qualify

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
	"github.com/rendermac/rendermac/internal/provenance"
	"github.com/rendermac/rendermac/internal/s3provider"
	"github.com/rendermac/rendermac/internal/shard"
	"github.com/rendermac/rendermac/internal/syncbuf"
)

// Config is one qualification: the campaigns' sizes, what runs against
// what, and where its files and messages go.
type Config struct {
	// Seeds and Steps size the model campaign; PGSeeds and PGSteps the
	// model-vs-Postgres campaign; StackSeeds and StackSteps the three-way
	// campaign (0 seeds: not run). FirstSeed is every campaign's first.
	Seeds, Steps           int
	PGSeeds, PGSteps       int
	StackSeeds, StackSteps int
	FirstSeed              uint64
	// Workers runs the model campaign's sequences in parallel; PGWorkers
	// the Postgres campaigns', each on its own database.
	Workers, PGWorkers int
	// FullCompareEvery is K, the whole-projection compare interval.
	FullCompareEvery int
	// DeterminismSeeds and DeterminismPGSeeds are the seeds run twice,
	// traces compared (0: skip).
	DeterminismSeeds, DeterminismPGSeeds int
	// Out is the directory for replay files and the linearizability
	// visualization (the caller writes the card there too).
	Out string
	// DB is the Postgres URL ("": an embedded cluster).
	DB string
	// ServerVariant and ModelVariant qualify a deliberately broken service
	// layer or model ("": none).
	ServerVariant, ModelVariant string
	// Scenarios selects scenarios by names or globs ("": all); NoScenarios
	// skips the catalogue.
	Scenarios   string
	NoScenarios bool
	// ArtifactsS3 runs the three-way campaign and the scenarios with
	// artifacts on a real S3 server; S3Scenarios are run a second time on
	// S3 otherwise ("": none).
	ArtifactsS3 bool
	S3Scenarios string
	// NoFleet skips the fleet campaign; FleetDuration is its load.
	NoFleet       bool
	FleetDuration time.Duration
	// Linearize sizes the linearizability check of the full stack's
	// concurrent histories (Linearize.Rounds 0: skip).
	Linearize LinearizeConfig
	// NoTimings leaves durations out, so two runs of one commit give
	// identical cards.
	NoTimings bool
	// NoRulesGate records the rules no check reaches without failing;
	// NoCoverageGate records coverage without failing on a cell never reached.
	NoRulesGate, NoCoverageGate bool
	// MutationCard is the last mutation card's JSON (the Rules section
	// says which rules it proves).
	MutationCard string
	// Mutants is the mutation catalogue's mutants with the rules each
	// breaks (the rule trace).
	Mutants []MutantRules
	// Gen is the generator's config; Weights the --weight settings that
	// made it, repeated in replay commands.
	Gen     fuzz.GenConfig
	Weights []string
	// Shard runs the Kth of N slices of every campaign's seeds and of the
	// scenarios.
	Shard shard.Spec
	// Build, Host and Command are the run's provenance on the card.
	Build   provenance.Build
	Host    string
	Command string
	// Bin is the rendermac binary the fleet campaign starts.
	Bin string
	// Log receives messages (setup, failures as they happen); Progress,
	// if not nil, the phases' progress.
	Log      io.Writer
	Progress Progress
}

// Progress is told how far each phase is; Done ends a phase's line.
type Progress interface {
	Update(phase string, done, total int)
	Done(phase string)
}

type noProgress struct{}

func (noProgress) Update(string, int, int) {}
func (noProgress) Done(string)             {}

// DefaultS3Scenarios are the scenarios qualify runs again on S3 by
// default: the ones whose outcome depends on the artifact store (the
// object-store outage against the real server process, PUTs of other
// bytes to a claimed output key, which the bucket refuses, and every kind
// of grant, which the bucket presigns and checks, with the sealed copies
// it serves).
var DefaultS3Scenarios = []string{"artifact_store_outage", "late_upload_after_commit", "upload_after_claim", "upload_during_verification",
	"grant_kinds"}

// DefaultFleet is qualify's fleet campaign: bounded (about half a minute of
// load, a minute in all), every fault kind at least once.
var DefaultFleet = fleet.Config{Duration: 25 * time.Second, Seed: 1, Agents: 3, Gateways: 2, Rate: 3,
	FaultEvery: 500 * time.Millisecond, DrainBound: fleet.Defaults.DrainBound, FFmpegPercent: 5}

// Default is the design paper's qualification (the flags' defaults).
func Default() Config {
	return Config{Seeds: 500, Steps: 200, PGSeeds: 500, PGSteps: 100, StackSeeds: 200, StackSteps: 60, FirstSeed: 1,
		Workers: runtime.NumCPU(), PGWorkers: DefaultWorkers("both"), FullCompareEvery: fuzz.DefaultFullCompareEvery,
		DeterminismSeeds: 20, DeterminismPGSeeds: 3, Out: "evidence-out", S3Scenarios: strings.Join(DefaultS3Scenarios, ","),
		FleetDuration: DefaultFleet.Duration, Linearize: DefaultLinearize, MutationCard: "docs/mutation-score.json",
		Gen: fuzz.DefaultGenConfig}
}

// Validate checks the sizes, the variant and the scenario selections.
func (c Config) Validate() error {
	if err := c.Gen.Validate(); err != nil {
		return ConfigError{"--weight: " + err.Error()}
	}
	if c.Seeds < 1 || c.Steps < 1 || c.PGSeeds < 0 || c.PGSteps < 1 || c.StackSeeds < 0 || c.StackSteps < 1 || c.Workers < 1 ||
		c.PGWorkers < 1 || c.FullCompareEvery < 1 {
		return ConfigError{"--seeds, --steps, --pg-steps, --stack-steps, --workers, --pg-workers and --full-compare-every must be at least 1, " +
			"--pg-seeds and --stack-seeds at least 0"}
	}
	if err := c.Linearize.validate(); err != nil {
		return err
	}
	if _, err := scenarios.VariantOptions(c.ServerVariant); err != nil {
		return ConfigError{"--server-variant: " + err.Error()}
	}
	if _, err := scenarios.Select(c.Scenarios); err != nil {
		return ConfigError{"--scenarios: " + err.Error()}
	}
	if c.S3Scenarios != "" {
		if _, err := scenarios.Select(c.S3Scenarios); err != nil {
			return ConfigError{"--s3-scenarios: " + err.Error()}
		}
	}
	return nil
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

// Run runs the qualification c describes and returns its card, not yet
// written (evidence.WriteAll writes it). An error is a run that could not
// be made (a bad config, a target that would not start); what the run
// found is on the card (card.Passed, card.Failures).
func Run(ctx context.Context, c Config) (evidence.Card, error) {
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Progress == nil {
		c.Progress = noProgress{}
	}
	if c.FleetDuration == 0 {
		c.FleetDuration = DefaultFleet.Duration
	}
	if err := c.Validate(); err != nil {
		return evidence.Card{}, err
	}
	start := time.Now()
	card := evidence.Card{Title: "Phase-fault qualification", Date: start.UTC().Format("2006-01-02"),
		Invariants: invariants, NotCovered: notCovered, NoTimings: c.NoTimings}
	card.Run = evidence.RunInfo{Build: c.Build, Host: c.Host, Command: c.Command, FirstSeed: c.FirstSeed,
		GeneratorWeights: c.Gen.WeightsString(), Shard: c.Shard.String()}
	log, prog := c.Log, c.Progress
	if c.Shard.Sharded() {
		fmt.Fprintf(log, "qualify: shard %s: a slice of every campaign's seeds and of the scenarios\n", c.Shard)
	}

	if c.ArtifactsS3 || c.S3Scenarios != "" {
		card.NotCovered = append(card.NotCovered, notCoveredOnS3)
	}
	checkContract(&card, log)
	// The fleet campaign runs its own server, agents, Postgres and object
	// store as processes, and most of its minute is wall time (load at a
	// fixed rate, faults on a timer, the drain), so it runs beside the
	// campaigns and scenarios rather than after them; its section, notes
	// and failures join the card at the end, where they were before.
	var fleetCard evidence.Card
	var waitFleet func() error // nil: no fleet campaign
	if !c.NoFleet && !c.Shard.Sharded() {
		log = &syncbuf.Writer{W: log}
		fleetCtx, cancelFleet := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- fleetCampaign(fleetCtx, &fleetCard, c, log) }()
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
	if !c.NoScenarios {
		scenarioCtx, cancelScenarios := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			pg := &scenarioPostgres{db: c.DB}
			defer pg.close()
			// The notes of scenarios not run come after the notes every
			// shard shares, as card merge orders them (evidence.Merge), so
			// a sharded run's merged card and the unsharded card agree.
			err := runScenarios(scenarioCtx, &scenarioCard, &notRun, c, pg, c.Scenarios, c.ArtifactsS3, prog)
			if err == nil {
				err = runS3Scenarios(scenarioCtx, &scenarioCard, &notRun, c, pg, prog)
			}
			done <- err
		}()
		waitScenarios = sync.OnceValue(func() error { return <-done })
		defer func() {
			cancelScenarios()
			_ = waitScenarios()
		}()
	}
	replays := filepath.Join(c.Out, "replays")
	model := Target{Target: "model", Variant: c.ModelVariant, Workers: c.Workers, Steps: c.Steps, OutDir: replays,
		Gen: c.Gen, Weights: c.Weights, Build: c.Build}
	gate := !c.NoCoverageGate
	if err := runCampaign(ctx, &card, "model", model, ShardSeeds(c.FirstSeed, c.Seeds, c.Shard), gate, prog, log); err != nil {
		return card, err
	}
	if err := runDeterminism(ctx, &card, "model", model, ShardSeeds(c.FirstSeed, min(c.DeterminismSeeds, c.Seeds), c.Shard), log); err != nil {
		return card, err
	}
	if c.PGSeeds > 0 {
		both := Target{Target: "both", Variant: c.ServerVariant, DB: c.DB, Workers: c.PGWorkers, FullEvery: c.FullCompareEvery, Steps: c.PGSteps,
			OutDir: replays, Gen: c.Gen, Weights: c.Weights, Build: c.Build}
		if err := runCampaign(ctx, &card, "model-vs-postgres", both, ShardSeeds(c.FirstSeed, c.PGSeeds, c.Shard), gate, prog, log); err != nil {
			return card, err
		}
		if err := runDeterminism(ctx, &card, "model-vs-postgres", both, ShardSeeds(c.FirstSeed, min(c.DeterminismPGSeeds, c.PGSeeds), c.Shard), log); err != nil {
			return card, err
		}
	}
	if c.StackSeeds > 0 {
		stack := Target{Target: "stack", Variant: c.ServerVariant, DB: c.DB, Workers: c.PGWorkers, FullEvery: c.FullCompareEvery, Steps: c.StackSteps,
			OutDir: replays, Gen: c.Gen, Weights: c.Weights, S3: c.ArtifactsS3, Build: c.Build}
		if err := runCampaign(ctx, &card, "model-vs-postgres-vs-stack", stack, ShardSeeds(c.FirstSeed, c.StackSeeds, c.Shard), gate, prog, log); err != nil {
			return card, err
		}
	}
	if err := runLinearize(ctx, &card, c, prog, log); err != nil {
		return card, err
	}
	if waitScenarios != nil {
		if err := waitScenarios(); err != nil {
			return card, err
		}
		card.Scenarios = scenarioCard.Scenarios
		card.Failures = append(card.Failures, scenarioCard.Failures...)
		card.NotCovered = append(card.NotCovered, scenarioCard.NotCovered...)
		card.NotCovered = append(card.NotCovered, notRun...)
	}
	if waitFleet != nil {
		if err := waitFleet(); err != nil {
			return card, err
		}
		card.NotCovered = append(card.NotCovered, fleetCard.NotCovered...)
		card.Failures = append(card.Failures, fleetCard.Failures...)
		card.Fleet = fleetCard.Fleet
	}
	if err := checkRules(&card, c); err != nil {
		return card, err
	}
	card.Passed = len(card.Failures) == 0
	if !c.NoTimings {
		card.Run.DurationMs = time.Since(start).Milliseconds()
	}
	return card, nil
}

// ContractReplay reruns the contract check alone.
const ContractReplay = "go test -count=1 -run TestProtocolAgreesWithContract ./harness/contract/"

// checkContract compares protocol's tables with the contract's text (the
// embedded docs/SPEC.md and docs/semantics.md) and records every table on
// the card; a table protocol disagrees on, or whose text cannot be read, is
// a failure. It runs in every shard (it is cheap and has no seeds); card
// merge keeps its failures once.
func checkContract(card *evidence.Card, log io.Writer) {
	for _, r := range contract.CheckEmbedded() {
		card.Contract = append(card.Contract, evidence.ContractCheck{Table: r.Table, Source: r.Source,
			Contract: r.Contract, Passed: r.Passed(), Detail: r.Detail})
		if !r.Passed() {
			fmt.Fprintf(log, "qualify: contract FAIL: %s (%s): %s\n", r.Table, r.Source, r.Detail)
			card.Failures = append(card.Failures, evidence.Failure{Source: evidence.ContractSource,
				Detail: fmt.Sprintf("%s (%s): %s", r.Table, r.Source, r.Detail), Replay: ContractReplay})
		}
	}
}

// runCampaign runs one campaign over its seeds (this shard's slice) and
// records it (and its first failure, shrunk, with a replay file) on the
// card, with its coverage; with gate, a required cell it never reached
// fails it. A shard whose slice is empty still records the campaign's row,
// with no seeds, so that every shard's card has the same rows.
func runCampaign(ctx context.Context, card *evidence.Card, name string, f Target, seeds Seeds,
	gate bool, prog Progress, log io.Writer) error {
	var res fuzz.CampaignResult
	start := time.Now() // reset once the target is set up: the row times the seeds only
	if len(seeds.List) > 0 {
		setup, cleanup, err := f.Open(ctx, log)
		if err != nil {
			return fmt.Errorf("%s campaign: %w", name, err)
		}
		defer cleanup()
		if f.Target != "model" && card.Run.PostgresVersion == "" {
			card.Run.PostgresKind, card.Run.PostgresVersion = setup.PGKind, setup.PGVersion
		}
		c := fuzz.Campaign{Factory: setup.Factory, Options: setup.Options, Gen: f.Gen, Seeds: seeds.List,
			Steps: f.Steps, Workers: f.Workers, Progress: func(done, total int) { prog.Update(name, done, total) },
			Tokens: TokenRule()}
		start = time.Now()
		res, err = c.Run(ctx)
		prog.Done(name)
		if err != nil {
			return fmt.Errorf("%s campaign: %w", name, err)
		}
	}
	camp := evidence.Campaign{Name: name, Target: f.Target, ArtifactStore: campaignStore(f), Seeds: len(seeds.List), FirstSeed: seeds.First, StepsPerSeq: f.Steps,
		Sequences: res.Seeds, Steps: res.Steps, Replies: res.Codes, Divergences: res.Divergences(),
		Violations: res.Violations(), Errors: res.Errors(), Passed: len(res.Failures) == 0,
		Coverage: CardCoverage(res.Coverage), TokensChecked: res.TokensChecked}
	camp.Passed = camp.Passed && len(res.TokenProblems) == 0
	if !card.NoTimings {
		camp.DurationMs = time.Since(start).Milliseconds()
	}
	// The coverage gate: a required transition, reply or fault the campaign
	// never reached fails it, named on the card and in the log. A shard
	// leaves the gate to card merge, which sums the shards' coverage.
	camp.Coverage.Gate = gate
	covFail, missed := evidence.CoverageFailure(name, *camp.Coverage)
	missed = missed && gate && card.Run.Shard == ""
	if missed {
		camp.Passed = false
		fmt.Fprintf(log, "qualify: coverage gate FAIL: %s: %s\n", name, covFail.Detail)
	}
	card.Campaigns = append(card.Campaigns, camp)
	for i, sf := range res.Failures {
		fl := evidence.Failure{Source: name, Seed: sf.Seed, Detail: sf.Result.Failure.String(), Target: f.Target, Variant: f.Variant,
			Replay: f.Command(fmt.Sprintf("--seed %d --steps %d", sf.Seed, f.Steps))}
		if i == 0 && sf.Shrunk != nil {
			path, err := f.WriteFailure(*sf.Shrunk)
			if err != nil {
				return err
			}
			fl.Detail = sf.ShrunkRes.Failure.String()
			fl.Replay = f.Command("--replay " + path)
			for _, ev := range sf.Shrunk.Events {
				fl.Events = append(fl.Events, ev.String())
			}
		}
		card.Failures = append(card.Failures, fl)
	}
	card.Failures = append(card.Failures, f.TokenFailures(name, res.TokenProblems)...)
	if missed {
		card.Failures = append(card.Failures, covFail)
	}
	return nil
}

// runDeterminism runs seeds of a campaign (this shard's slice of the
// sample) twice each and records, as a campaign row "determinism: NAME",
// whether every step's replies and rows hashed the same both times; a seed
// that did not is a failure naming the first differing step. No sample, no
// row; a shard with an empty slice of a sample records the row with none.
func runDeterminism(ctx context.Context, card *evidence.Card, name string, f Target, seeds Seeds, log io.Writer) error {
	if seeds.Total <= 0 {
		return nil
	}
	var diffs []fuzz.Nondeterminism
	start := time.Now() // reset once the target is set up, as for campaigns
	if len(seeds.List) > 0 {
		setup, cleanup, err := f.Open(ctx, log)
		if err != nil {
			return fmt.Errorf("determinism %s: %w", name, err)
		}
		defer cleanup()
		start = time.Now()
		diffs, err = fuzz.CheckDeterminism(ctx, setup.Factory, setup.Options, f.Gen, seeds.List, f.Steps)
		if err != nil {
			return fmt.Errorf("determinism %s: %w", name, err)
		}
	}
	n := len(seeds.List)
	camp := evidence.Campaign{Name: "determinism: " + name, Target: f.Target, Seeds: n, FirstSeed: seeds.First,
		StepsPerSeq: f.Steps, Sequences: 2 * n, Steps: 2 * n * f.Steps, Divergences: len(diffs), Passed: len(diffs) == 0}
	if !card.NoTimings {
		camp.DurationMs = time.Since(start).Milliseconds()
	}
	card.Campaigns = append(card.Campaigns, camp)
	for _, d := range diffs {
		card.Failures = append(card.Failures, evidence.Failure{Source: "determinism: " + name, Seed: d.Seed,
			Detail: d.String() + " (run the replay command twice and compare)", Target: f.Target, Variant: f.Variant,
			Replay: f.Command(fmt.Sprintf("--seed %d --steps %d", d.Seed, f.Steps))})
	}
	return nil
}

// raceCount matches the measured share of a race scenario's rounds.
var raceCount = regexp.MustCompile(`\([1-9][0-9]* during verification\)`)

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

// runScenarios runs the phase-fault catalogue against the full stack and
// records every scenario (and each failure with its replay command).
func runScenarios(ctx context.Context, card *evidence.Card, notRun *[]string, c Config, pgs *scenarioPostgres, names string,
	onS3 bool, prog Progress) error {
	opts, err := scenarios.VariantOptions(c.ServerVariant)
	if err != nil {
		return ConfigError{err.Error()}
	}
	opts.ArtifactsS3 = onS3
	list, err := scenarios.Select(names)
	if err != nil {
		return ConfigError{"--scenarios: " + err.Error()}
	}
	phase := "scenarios"
	if onS3 && !c.ArtifactsS3 {
		phase = "scenarios on S3"
	}
	lo, hi := c.Shard.Range(len(list))
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
		prog.Update(phase, i+1, len(list))
		ev := res.Evidence(c.NoTimings)
		if onS3 {
			ev.ArtifactStore = "s3"
		}
		if c.NoTimings {
			// How lanes interleave and how many of a race's rounds landed in
			// which window are timing too; a deterministic card leaves them out.
			ev.Timeline = nil
			ev.Observed = raceCount.ReplaceAllString(ev.Observed, "(at least one during verification)")
		}
		card.Scenarios = append(card.Scenarios, ev)
		if !res.Passed {
			replay := "go run -tags faultpoints ./cmd/rendermac scenarios --run " + s.Name
			if c.ServerVariant != "" {
				replay = "go run -tags faultpoints,mutations ./cmd/rendermac scenarios --run " + s.Name + " --variant " + c.ServerVariant
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
	prog.Done(phase)
	return nil
}

// runS3Scenarios runs S3Scenarios with artifacts on S3, unless the whole
// catalogue already ran there (ArtifactsS3) or the list is empty. Without
// versitygw it records what was not run, or fails under CI=true, which
// installs it (.ci/setup).
func runS3Scenarios(ctx context.Context, card *evidence.Card, notRun *[]string, c Config, pgs *scenarioPostgres, prog Progress) error {
	if c.ArtifactsS3 || c.S3Scenarios == "" {
		return nil
	}
	if _, err := s3provider.Find(); err != nil {
		if os.Getenv("CI") == "true" {
			return fmt.Errorf("scenarios on S3 (--s3-scenarios): %w", err)
		}
		card.NotCovered = append(card.NotCovered, fmt.Sprintf("Scenarios on S3 (%s) were not run: %v.", c.S3Scenarios, err))
		return nil
	}
	if err := runScenarios(ctx, card, notRun, c, pgs, c.S3Scenarios, true, prog); err != nil {
		return err
	}
	card.NotCovered = append(card.NotCovered, fmt.Sprintf("On S3 only the scenarios %s ran (entries @s3); the rest of the catalogue "+
		"and the three-way campaign ran with artifacts in a directory (`qualify --artifacts-s3` runs them all on S3).", c.S3Scenarios))
	return nil
}

// notCoveredOnS3 is what no qualify run covers on S3, with or without
// ArtifactsS3.
const notCoveredOnS3 = "On S3: a full or refusing bucket (artifact_store_full injects its fault in the control plane's store, which " +
	"the agent's presigned PUT does not pass through); the campaign's upload op goes through the control plane's artifact handler, not " +
	"a presigned PUT to the bucket (the scenarios make those); the bucket's create-only check was run against versitygw only."

// campaignStore is where a campaign's artifacts live, for the card: the
// stack target's store; "" for targets without one.
func campaignStore(f Target) string {
	switch {
	case f.Target != "stack":
		return ""
	case f.S3:
		return "s3"
	}
	return "fs"
}

// fleetCampaign runs the fleet campaign with c.Bin and puts its Fleet
// section, and a failure per violated check, on the card.
func fleetCampaign(ctx context.Context, card *evidence.Card, c Config, log io.Writer) error {
	cfg := DefaultFleet
	cfg.Duration = c.FleetDuration
	cfg.Bin = c.Bin
	if cfg.Bin == "" {
		bin, err := os.Executable()
		if err != nil {
			return err
		}
		cfg.Bin = bin
	}
	cfg.KeepOnFailure = true
	switch perr := fleet.PatroniAvailable(); {
	case perr == nil:
		cfg.Postgres = fleet.PostgresPatroni
	case os.Getenv("CI") == "true":
		return fmt.Errorf("fleet campaign: the Patroni cluster is required under CI=true: %w", perr)
	default:
		card.NotCovered = append(card.NotCovered, "The fleet campaign ran on one local Postgres (no primary kill, no switchover): "+perr.Error()+".")
	}
	fmt.Fprintf(log, "qualify: fleet campaign (%s of load, %d agents, %d gateways, postgres %s)\n", cfg.Duration, cfg.Agents,
		cfg.Gateways, cfg.Postgres)
	rep, err := fleet.Run(ctx, cfg)
	if err != nil {
		return fmt.Errorf("fleet campaign: %w", err)
	}
	if rep.StoreNote != "" {
		card.NotCovered = append(card.NotCovered, "The fleet campaign's object-store outage: "+rep.StoreNote+".")
	}
	sec := &evidence.Fleet{Command: cfg.ReplayCommand(), Agents: cfg.Agents, Gateways: cfg.Gateways, Store: rep.Store, Transport: rep.Transport,
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
	for _, ch := range rep.AllChecks() {
		if ch.ID != "" {
			sec.Checks = append(sec.Checks, ch.ID)
		}
		for _, v := range ch.Violations {
			sec.Violations = append(sec.Violations, ch.Name+": "+v)
		}
		if len(ch.Violations) > 0 {
			detail := ch.Name + ": " + strings.Join(ch.Violations, "; ")
			if rep.Dir != "" {
				detail += " (process logs kept in " + rep.Dir + ")"
			}
			card.Failures = append(card.Failures, evidence.Failure{Source: "fleet", Detail: detail,
				Replay: cfg.ReplayCommand()})
		}
	}
	card.Fleet = sec
	return nil
}
