package qualify

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/rendermac/rendermac/docs"
	"github.com/rendermac/rendermac/harness/contract"
	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/model"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/provenance"
	"github.com/rendermac/rendermac/internal/s3provider"
	"github.com/rendermac/rendermac/internal/shard"
	"github.com/rendermac/rendermac/server/fencing"
)

// Target is one seeded campaign's target choice, as `rendermac fuzz` and
// qualify both run it: what runs (model; both: model and Postgres; stack:
// model, Postgres and the full stack), broken how, and where a shrunk
// failure's replay file goes.
type Target struct {
	// Target is model, both or stack.
	Target string
	// Variant is a broken variant: the model's with Target model, the
	// service layer's otherwise ("" for none).
	Variant string
	// DB is the Postgres URL ("": an embedded cluster).
	DB string
	// OutDir is the directory for shrunk failing sequences.
	OutDir string
	// Workers is the sequences run in parallel.
	Workers int
	// FullEvery is K, the whole-projection compare interval (0: default).
	FullEvery int
	// Steps is the events per sequence.
	Steps int
	// S3 puts the stack target's artifacts on a real S3 server (versitygw).
	S3 bool
	// Gen is the generator's config; Weights the --weight settings that
	// made it, repeated in replay commands.
	Gen     fuzz.GenConfig
	Weights []string
	// Build is the provenance written into replay files.
	Build provenance.Build
}

// Setup is what a campaign needs from its target choice.
type Setup struct {
	Factory           fuzz.Factory
	Options           fuzz.Options
	PGKind, PGVersion string
}

// ConfigError is a configuration the caller got wrong (an unknown variant,
// target or scenario): the CLI reports it as a usage error.
type ConfigError struct{ Msg string }

func (e ConfigError) Error() string { return e.Msg }

// DefaultWorkers is the workers' default for a target: one per CPU for the
// model, targets.WorkersPerCPU per CPU against Postgres.
func DefaultWorkers(target string) int {
	if target == "model" {
		return runtime.NumCPU()
	}
	return targets.WorkersPerCPU * runtime.NumCPU()
}

// ModelVariantNames are the model's broken variants, the values Variant
// takes with Target model.
func ModelVariantNames() []string {
	return []string{string(model.VariantCommitFromCancelling), string(model.VariantNoEpochCheck),
		string(model.VariantRequeuePastBudget), string(model.VariantKeepSlot), string(model.VariantWithdrawCharged)}
}

// Open sets the target up; cleanup releases what it started.
func (f Target) Open(ctx context.Context, log io.Writer) (Setup, func(), error) {
	switch f.Target {
	case "model":
		if f.Variant != "" && !slices.Contains(ModelVariantNames(), f.Variant) {
			return Setup{}, nil, ConfigError{fmt.Sprintf("unknown model --variant %q (want one of %s)", f.Variant, strings.Join(ModelVariantNames(), ", "))}
		}
		mut := model.Variant(f.Variant)
		return Setup{Factory: func(_ context.Context, _ int, seed uint64) ([]fuzz.Target, error) {
			return []fuzz.Target{fuzz.NewModelTarget(seed, mut)}, nil
		}}, func() {}, nil
	case "both", "stack":
		return f.openPostgres(ctx, log)
	}
	return Setup{}, nil, ConfigError{fmt.Sprintf("unknown --target %q (want model, both or stack)", f.Target)}
}

// openPostgres runs the model and the Postgres service layer side by side
// (both), and for stack the full stack as a third target. Variant breaks
// the service layer, never the model; with stack only the full stack's,
// so that the failure shows the stack driver catching it.
func (f Target) openPostgres(ctx context.Context, log io.Writer) (Setup, func(), error) {
	var names []string
	for _, m := range targets.ServerVariants() {
		names = append(names, string(m))
	}
	if f.Variant != "" && !slices.Contains(names, f.Variant) {
		if len(names) == 0 {
			return Setup{}, nil, ConfigError{fmt.Sprintf("server --variant %q: %v", f.Variant, fencing.ErrNoVariants)}
		}
		return Setup{}, nil, ConfigError{fmt.Sprintf("unknown server --variant %q (want one of %s)", f.Variant, strings.Join(names, ", "))}
	}
	pg, err := targets.OpenPostgres(ctx, f.DB, log)
	if err != nil {
		return Setup{}, nil, err
	}
	pgVariant := fencing.Variant(f.Variant)
	if f.Target == "stack" {
		pgVariant = fencing.VariantNone
	}
	workers, err := targets.NewPostgresWorkers(ctx, f.Workers, pgVariant, pg.NewWorkerDatabase)
	if err != nil {
		_ = pg.Close()
		return Setup{}, nil, err
	}
	cleanup := func() {
		workers.Close()
		_ = pg.Close()
	}
	factory := workers.Factory("")
	if f.Target == "stack" {
		stack, err := targets.NewStackWorkers(ctx, f.Workers, fencing.Variant(f.Variant), pg.NewWorkerDatabase)
		if err != nil {
			cleanup()
			return Setup{}, nil, err
		}
		pgCleanup := cleanup
		cleanup = func() {
			stack.Close()
			pgCleanup()
		}
		if f.S3 {
			srv, err := s3provider.Open(ctx, s3provider.Options{})
			if err != nil {
				cleanup()
				return Setup{}, nil, err
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
	opts := fuzz.Options{Outputs: targets.SyntheticOutput, CompareState: true, FullCompareEvery: f.FullEvery}
	version, _ := pg.Provider.Version(ctx)
	return Setup{Factory: factory, Options: opts, PGKind: pg.Provider.Kind(), PGVersion: version}, cleanup, nil
}

// Command is the `rendermac fuzz` command line that reruns this target
// with rest (the seeds or a replay file).
func (f Target) Command(rest string) string {
	cmd := "go run ./cmd/rendermac fuzz --target " + f.Target
	if f.Variant != "" {
		if f.Target != "model" { // a server variant exists only with -tags mutations
			cmd = "go run -tags mutations ./cmd/rendermac fuzz --target " + f.Target
		}
		cmd += " --variant " + f.Variant
	}
	for _, w := range f.Weights {
		cmd += " --weight " + w
	}
	if f.FullEvery != fuzz.DefaultFullCompareEvery && f.FullEvery != 0 {
		cmd += fmt.Sprintf(" --full-compare-every %d", f.FullEvery)
	}
	return cmd + " " + rest
}

// WriteFailure writes a failing sequence as a replay file in OutDir and
// returns its path.
func (f Target) WriteFailure(seq fuzz.Sequence) (string, error) {
	if err := os.MkdirAll(f.OutDir, 0o755); err != nil {
		return "", fmt.Errorf("write failure: %w", err)
	}
	path := filepath.Join(f.OutDir, fmt.Sprintf("%s-seed-%d.txt", f.Target, seq.Seed))
	file, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("write failure: %w", err)
	}
	defer file.Close()
	if err := fuzz.WriteReplay(file, fuzz.ReplayFile{Target: f.Target, Variant: f.Variant, Build: f.Build,
		Weights: f.Gen.WeightsString(), Seq: seq}); err != nil {
		return "", fmt.Errorf("write failure %s: %w", path, err)
	}
	return path, file.Close()
}

// TokenRule is the form the contract's text gives offered commit tokens,
// which campaigns check every offer against; nil when the text cannot be
// read (the contract check on the card reports that).
func TokenRule() *fuzz.TokenRule {
	n, alphabet, err := contract.TokenForm(docs.SPEC)
	if err != nil {
		return nil
	}
	return &fuzz.TokenRule{Len: n, Alphabet: alphabet}
}

// TokenFailures turns a campaign's token problems into card failures: a
// token of the wrong form replays with its seed, a token offered twice with
// the seeds from the first offer's to the second's.
func (f Target) TokenFailures(source string, problems []fuzz.TokenProblem) []evidence.Failure {
	var out []evidence.Failure
	for _, p := range problems {
		replay := f.Command(fmt.Sprintf("--seed %d --steps %d", p.Seed, f.Steps))
		if p.Repeat {
			replay = f.Command(fmt.Sprintf("--first-seed %d --seeds %d --steps %d", p.FirstSeed, p.Seed-p.FirstSeed+1, f.Steps))
		}
		out = append(out, evidence.Failure{Source: source, Seed: p.Seed, Target: f.Target, Variant: f.Variant,
			Detail: fmt.Sprintf("step %d: %s", p.Step, p.Detail), Replay: replay})
	}
	return out
}

// CardCoverage is a campaign's coverage as the card states it, with the
// required cells and the tables.
func CardCoverage(c fuzz.Coverage) *evidence.Coverage {
	req, tab := fuzz.RequiredCoverage(), fuzz.TransitionTables()
	return &evidence.Coverage{
		JobTransitions:     maps.Clone(c.JobTransitions),
		AttemptTransitions: maps.Clone(c.AttemptTransitions),
		Replies:            maps.Clone(c.Replies),
		Faults:             maps.Clone(c.Faults),
		FaultPhases:        maps.Clone(c.FaultPhases),
		Required: evidence.CoverageRequired{JobTransitions: req.JobTransitions,
			AttemptTransitions: req.AttemptTransitions, Replies: req.Replies, Faults: req.Faults},
		Tables: evidence.CoverageTables{JobStatuses: tab.JobStatuses, AttemptStatuses: tab.AttemptStatuses,
			JobTransitions: tab.JobTransitions, AttemptTransitions: tab.AttemptTransitions,
			FaultPhases: fuzz.FaultPhaseNames()},
	}
}

// Seeds is this shard's part of a campaign's seeds: Total seeds from the
// campaign's first, of which List (starting at First) is the slice.
type Seeds struct {
	Total int
	First uint64
	List  []uint64
}

// ShardSeeds slices the seeds first..first+total-1 for sh (all of them for
// the whole run).
func ShardSeeds(first uint64, total int, sh shard.Spec) Seeds {
	lo, hi := sh.Range(total)
	s := Seeds{Total: total, First: first + uint64(lo), List: make([]uint64, 0, hi-lo)}
	for i := lo; i < hi; i++ {
		s.List = append(s.List, first+uint64(i))
	}
	return s
}
