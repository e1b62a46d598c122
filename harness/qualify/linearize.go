package qualify

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/harness/linearize"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/server/fencing"
)

// LinearizeCheck is the check name of the linearizability phase in the
// rule trace (contract.Traced).
const LinearizeCheck = "linearizability"

// LinearizeConfig sizes the linearizability phase: Rounds seeded runs of
// concurrent clients against the full stack, each history checked with
// porcupine against the model, job by job.
type LinearizeConfig struct {
	// Rounds is the runs (0: skip); round i has seed Seed+i.
	Rounds int
	Seed   uint64
	// The workload of one round (linearize.Workload).
	Jobs, AgentsPerDevice, Adversaries, Cancellers, Watchers int
	// Duration bounds one round's run (it ends earlier once every job
	// ended); Timeout bounds porcupine's search of one round.
	Duration, Timeout time.Duration
}

// DefaultLinearize is qualify's linearizability phase: two rounds of about
// two seconds each.
var DefaultLinearize = LinearizeConfig{Rounds: 2, Seed: 1, Jobs: 10, AgentsPerDevice: 2, Adversaries: 8, Cancellers: 2, Watchers: 4,
	Duration: 4 * time.Second, Timeout: 20 * time.Second}

func (l LinearizeConfig) validate() error {
	if l.Rounds < 0 || l.Rounds > 0 && (l.Jobs < 1 || l.AgentsPerDevice < 1 || l.Duration <= 0 || l.Timeout <= 0) {
		return ConfigError{"--linearize-rounds must be at least 0; a round needs jobs, agents, a duration and a timeout"}
	}
	return nil
}

func (l LinearizeConfig) workload(seed uint64) linearize.Workload {
	return linearize.Workload{Seed: seed, Jobs: l.Jobs, AgentsPerDevice: l.AgentsPerDevice, Adversaries: l.Adversaries,
		Cancellers: l.Cancellers, Watchers: l.Watchers, Duration: l.Duration}
}

// linearizeReplay is the qualify command that reruns the phase alone with
// c's rounds (a shard's slice from its first seed).
func linearizeReplay(c Config, first uint64, rounds int) string {
	cmd := "go run ./cmd/rendermac qualify --seeds 1 --pg-seeds 0 --stack-seeds 0 --determinism-seeds 0 --no-scenarios --no-fleet " +
		"--no-coverage-gate --no-rules-gate"
	if c.ServerVariant != "" {
		cmd = "go run -tags mutations ./cmd/rendermac qualify --server-variant " + c.ServerVariant +
			" --seeds 1 --pg-seeds 0 --stack-seeds 0 --determinism-seeds 0 --no-scenarios --no-fleet --no-coverage-gate --no-rules-gate"
	}
	return fmt.Sprintf("%s --linearize-seed %d --linearize-rounds %d", cmd, first, rounds)
}

// runLinearize runs this shard's slice of the rounds and puts the
// Linearizability section on the card; a round whose history porcupine
// does not prove linearizable (or that the stack answered with an error)
// is a failure with the visualization beside the card and the command that
// reruns it.
func runLinearize(ctx context.Context, card *evidence.Card, c Config, prog Progress, log io.Writer) error {
	lc := c.Linearize
	if lc.Rounds == 0 {
		return nil
	}
	lo, hi := c.Shard.Range(lc.Rounds)
	first := lc.Seed + uint64(lo)
	w0 := lc.workload(first)
	sec := &evidence.Linearizability{Rounds: hi - lo, FirstSeed: first, Jobs: lc.Jobs, Passed: true,
		Clients: linearize.Clients(linearize.World{Devices: linearize.Devices()}, w0), Command: linearizeReplay(c, lc.Seed, lc.Rounds)}
	card.Linearizability = sec
	if hi == lo {
		return nil
	}
	pg, err := targets.OpenPostgres(ctx, c.DB, log)
	if err != nil {
		return fmt.Errorf("linearizability: %w", err)
	}
	defer pg.Close()
	workers, err := targets.NewPostgresWorkers(ctx, 1, fencing.Variant(c.ServerVariant), pg.NewWorkerDatabase)
	if err != nil {
		return fmt.Errorf("linearizability: %w", err)
	}
	defer workers.Close()
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return fmt.Errorf("linearizability: %w", err)
	}
	var runTime, checkTime time.Duration
	for i := range hi - lo {
		seed := first + uint64(i)
		w := lc.workload(seed)
		fail := func(detail string) {
			sec.Passed = false
			card.Failures = append(card.Failures, evidence.Failure{Source: evidence.LinearizabilitySource, Seed: seed,
				Detail: detail, Replay: linearizeReplay(c, seed, 1)})
		}
		target, err := linearize.NewStackTarget(ctx, workers, seed)
		if err != nil {
			return fmt.Errorf("linearizability: %w", err)
		}
		world, err := linearize.SeedWorld(ctx, target, w)
		if err != nil {
			return fmt.Errorf("linearizability: %w", err)
		}
		start := time.Now()
		h, err := linearize.RunWorkload(ctx, target, world, w)
		runTime += time.Since(start)
		prog.Update(LinearizeCheck, i+1, hi-lo)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fail(fmt.Sprintf("the stack answered an operation with an error: %v", err))
			continue
		}
		res := linearize.CheckDetail(h, linearize.CheckOptions{Timeout: lc.Timeout, Log: log,
			VisualizePath: filepath.Join(c.Out, fmt.Sprintf("linearizability-seed-%d.html", seed))})
		checkTime += res.Elapsed
		sec.Histories += res.Partitions
		sec.Operations += res.Checked
		sec.Recorded += len(h.Ops)
		sec.Longest = max(sec.Longest, res.Longest)
		if res.Result != porcupine.Ok {
			detail := fmt.Sprintf("the history of %d operations (%d job histories) is %s against the model", len(h.Ops),
				res.Partitions, res.Result)
			if res.VisualizePath != "" {
				detail += "; porcupine's visualization: " + res.VisualizePath
				sec.Visualizations = append(sec.Visualizations, res.VisualizePath)
			}
			fmt.Fprintf(log, "qualify: linearizability FAIL: seed %d: %s\n", seed, detail)
			fail(detail)
		}
	}
	prog.Done(LinearizeCheck)
	if !card.NoTimings {
		sec.RunMs, sec.CheckMs = runTime.Milliseconds(), checkTime.Milliseconds()
	}
	return nil
}
