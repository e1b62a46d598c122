package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/rendermac/rendermac/harness/soak"
)

// runSoak is `rendermac soak`: the whole stack under a bounded mixed load
// with seeded random faults, then every check of what must not be lost.
// Exit 1 on any violation, with the command that replays the schedule.
func runSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	d := soak.Defaults
	set := newFlagSet("soak", "[--duration D] [--seed N] [--agents N] [--rate R] [--fault-every D] [--drain D]", stderr)
	duration := set.Duration("duration", d.Duration, "how long load and faults run (the drain and checks follow)")
	seed := set.Uint64("seed", d.Seed, "seed of the fault schedule and every load decision")
	agents := set.Int("agents", d.Agents, "agents (one slot each)")
	rate := set.Float64("rate", d.Rate, "jobs submitted per second")
	every := set.Duration("fault-every", d.FaultEvery, "mean pause between two faults")
	drain := set.Duration("drain", d.Drain, "bound on the wait, after the load, for every job to end and webhook to be delivered")
	if err := parseFlags(set, args); err != nil {
		return err
	}
	switch {
	case *duration <= 0 || *duration > 24*time.Hour:
		return usageError{"--duration must be positive and at most 24h"}
	case *agents < 1 || *agents > 1000:
		return usageError{"--agents must be 1..1000"}
	case *rate <= 0 || *rate > 1000:
		return usageError{"--rate must be in (0, 1000] jobs/s"}
	case *every < 100*time.Millisecond:
		return usageError{"--fault-every must be at least 100ms"}
	case *drain < time.Second:
		return usageError{"--drain must be at least 1s"}
	}
	replay := fmt.Sprintf("rendermac soak --duration %s --seed %d --agents %d --rate %g --fault-every %s --drain %s",
		*duration, *seed, *agents, *rate, *every, *drain)
	p := newProgress(stderr)
	cfg := soak.Config{Duration: *duration, Seed: *seed, Agents: *agents, Rate: *rate, FaultEvery: *every,
		Drain: *drain, Log: stderr}
	if p.tty {
		cfg.Progress = func(el time.Duration, s soak.Stats) {
			p.Update(fmt.Sprintf("soak %d faults %d ok", s.Faults, s.Commits), int(el/time.Second), int(*duration/time.Second))
		}
	}
	rep, err := soak.Run(ctx, cfg)
	if p.tty {
		p.Done("soak")
	}
	if err != nil {
		return fmt.Errorf("%w\nreplay: %s", err, replay)
	}
	if err := rep.PrintTable(stdout); err != nil {
		return err
	}
	if n := rep.Violations(); n > 0 {
		fmt.Fprintf(stdout, "\nFAIL: %d violations\nreplay: %s\n", n, replay)
		return exitError{1}
	}
	fmt.Fprintf(stdout, "\nPASS: 0 violations (replay: %s)\n", replay)
	return nil
}
