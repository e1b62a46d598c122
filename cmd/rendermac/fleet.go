package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rendermac/rendermac/harness/fleet"
	"github.com/rendermac/rendermac/internal/patroniprovider"
	"github.com/rendermac/rendermac/internal/s3provider"
)

func runFleet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := fleet.Defaults
	set := newFlagSet("fleet", "[--duration D] [--seed N] [--agents N] [--gateways N] [--rate R] [--fault-every D] [--drain-bound D] [--ffmpeg-percent P] [--store auto|fs|s3] [--postgres local|patroni] [--pg-variant async_holdback] [--agent-variant V] [--keep]", stderr)
	set.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long load and faults run at least (until every fault kind was injected once, if that takes longer; the drain comes after)")
	set.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "fixes the fault schedule and the load's choices")
	set.IntVar(&cfg.Agents, "agents", cfg.Agents, "rendermac agent processes (2 slots each)")
	set.IntVar(&cfg.Gateways, "gateways", cfg.Gateways, "rendermac server processes sharing one Postgres and artifact dir")
	set.Float64Var(&cfg.Rate, "rate", cfg.Rate, "jobs submitted per second")
	set.DurationVar(&cfg.FaultEvery, "fault-every", cfg.FaultEvery, "mean pause between two faults")
	set.DurationVar(&cfg.DrainBound, "drain-bound", cfg.DrainBound, "the queue must drain within this after the last fault healed")
	set.IntVar(&cfg.FFmpegPercent, "ffmpeg-percent", cfg.FFmpegPercent, "share of jobs rendered by FFmpeg where ffmpeg runs (0: none)")
	set.StringVar(&cfg.Store, "store", fleet.StoreAuto, "the gateways' shared artifact store: s3 (a versitygw process the run starts, "+
		"stops for the object-store outage fault and restarts; "+s3provider.InstallCommand+" installs it), fs (one directory, no outage fault) "+
		"or auto (s3 when versitygw is found, else fs)")
	set.StringVar(&cfg.Postgres, "postgres", fleet.PostgresLocal, "the gateways' database: local (one embedded cluster, crashed and "+
		"restarted in place) or patroni (etcd and three Postgres nodes under Patroni, synchronous_mode, a multi-host --db; "+
		"faults: primary killed, switchover; needs: "+patroniprovider.InstallCommand+")")
	set.StringVar(&cfg.PGVariant, "pg-variant", "", "break the Patroni cluster on purpose: async_holdback (asynchronous "+
		"replication, the standbys' WAL held back before each primary kill), which must fail the run naming the lost acknowledgements")
	set.StringVar(&cfg.AgentVariant, "agent-variant", "", "run every agent as a broken variant, which must fail the run (a -tags mutations build only)")
	set.BoolVar(&cfg.Keep, "keep", false, "keep the run directory (every process's log)")
	if err := parseFlags(set, args); err != nil {
		return err
	}
	if !slices.Contains(fleet.Stores(), cfg.Store) {
		return usageError{fmt.Sprintf("--store %q: want one of %s", cfg.Store, strings.Join(fleet.Stores(), ", "))}
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.Bin = bin
	cfg.Log = stderr
	cfg.KeepOnFailure = true
	rep, err := fleet.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if err := rep.PrintTable(stdout); err != nil {
		return err
	}
	if n := rep.Violations(); n > 0 {
		fmt.Fprintf(stdout, "FAIL: %d violations\nreplay: %s\nprocess logs: %s\n", n, cfg.ReplayCommand(), rep.Dir)
		return exitError{code: 1}
	}
	fmt.Fprintf(stdout, "PASS (drained %s after the last heal, wasted work %s", rep.DrainTime.Round(time.Millisecond),
		rep.WastedTotal().Round(time.Millisecond))
	if len(rep.PrimaryLosses) > 0 {
		fmt.Fprintf(stdout, ", %d primary losses, longest failover outage %s", len(rep.PrimaryLosses), rep.MaxOutage().Round(time.Millisecond))
	}
	fmt.Fprintln(stdout, ")")
	return nil
}
