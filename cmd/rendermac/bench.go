package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/rendermac/rendermac/harness/bench"
	"github.com/rendermac/rendermac/server/api"
)

// parseSizes reads --history's comma-separated sizes: each 0..100,000,000
// finished jobs (the disk is the bound: about 3 KB a job).
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > 100000000 {
			return nil, fmt.Errorf("%q is not a size of 0..100000000 finished jobs", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// runBench is `rendermac bench`: the whole stack (embedded Postgres, control
// plane, buyers over HTTP, agents over WebSockets) under load, beside
// pgbench on the same cluster, with the goals checked: beside the
// lease transaction, the replay of the stack's own statement mix (the
// Postgres floor) and pgbench SELECT 1 (the round-trip limit).
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	d := bench.Defaults
	set := newFlagSet("bench", "[--agents N] [--slots S] [--jobs M] [--duration D] [--rounds R] [--two-process] [--json FILE] [--cpuprofile FILE]\n"+
		"       rendermac bench --history SIZES [--queued Q] [--devices D] [--device-slots S] [--window D] [--samples N] [--out DIR] [--pg-dir DIR] [--check-invariants]\n"+
		"       rendermac bench --client-only --url URL --db URL [--metrics-url URL] [--metrics-token-file FILE] [--agents N] [--slots S] [--jobs M] [--duration D]", stderr)
	agents := set.Int("agents", d.Agents, "simulated agents")
	slots := set.Int("slots", d.Slots, "slots of each simulated agent (attempts it works at once)")
	twoProcess := set.Bool("two-process", false, "also run the stack phases against rendermac server started as a subprocess (this binary), so client and server cost are separate")
	clientOnly := set.Bool("client-only", false, "only generate the load, against a server already running at --url on the database --db (no embedded Postgres, pgbench, idle sessions or campaigns)")
	url := set.String("url", "", "with --client-only: the server's base URL, e.g. http://127.0.0.1:8080")
	db := set.String("db", os.Getenv("DATABASE_URL"), "with --client-only: the server's Postgres URL, for the setup (buyers, devices) and the invariant check (env DATABASE_URL)")
	metricsURL := set.String("metrics-url", "", "with --client-only: the base URL of the server's /metrics when it has a listener of its own (server --metrics-listen; default --url)")
	metricsTokenFile := set.String("metrics-token-file", "", "with --client-only: the file holding the bearer token of the server's /metrics (server --metrics-token-file); the token is sent, never printed")
	jobs := set.Int("jobs", d.Jobs, "jobs of the peak phase, all submitted up front")
	duration := set.Duration("duration", d.Duration, "submission window of the half-peak latency phase (the progress phase runs half of it)")
	idle := set.Int("idle-sessions", d.IdleSessions, "idle sessions held for the memory figure")
	pgClients := set.Int("pgbench-clients", d.PgbenchClients, "pgbench clients (-c and -j)")
	pgSeconds := set.Int("pgbench-seconds", d.PgbenchSeconds, "pgbench -T")
	script := set.String("pgbench-script", "", "lease transaction script (default: server/fencing/testdata/lease.pgbench found from the working directory)")
	floorScript := set.String("floor-script", "", "the replay of a job's statement mix, run at the peak's concurrency (agents x slots, at most the server pool's 20 connections) as the Postgres floor (default: server/fencing/testdata/job.pgbench found from the working directory)")
	rounds := set.Int("rounds", d.Rounds, "rounds of the peak, each followed by the floor's replay; the full stack is held to the floor by the median round's ratio")
	jsonOut := set.String("json", "", "also write the result as JSON to this file")
	cpuprofile := set.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	idleClients := set.Bool("idle-clients", false, "internal: be the memory phase's client process (plan on stdin)")
	history := set.String("history", "", "history-scale bench instead: comma-separated sizes of finished-job history (e.g. 0,1000000,10000000), each seeded into its own database and measured beside the empty one (see docs/bench.md)")
	queued := set.Int("queued", 100000, "with --history: queued jobs in every database")
	devices := set.Int("devices", 1000, "with --history: connected simulated devices of the load window")
	deviceSlots := set.Int("device-slots", 1, "with --history: slots of each simulated device")
	window := set.Duration("window", 10*time.Second, "with --history: the load window whose leases and commits are timed (after 3s of warm-up)")
	samples := set.Int("samples", 15, "with --history: how many times each read (scrape, sweep, page) is timed")
	out := set.String("out", "bench-history", "with --history: directory of "+bench.HistoryReportName+" and "+bench.HistoryPlotName+" (a console's --cards directory shows them)")
	pgDir := set.String("pg-dir", "", "with --history: where the cluster's data directory goes (default: the temporary directory; ten million jobs take about 34 GB)")
	replot := set.Bool("replot", false, "with --out: draw the plot of the history report in --out again (no run)")
	seedWorkers := set.Int("seed-workers", 4, "with --history: connections that seed at once")
	checkInv := set.Bool("check-invariants", false, "with --history: check SPEC section 4 over each seeded database before measuring it (reads the whole journal: for the smaller sizes)")
	if err := parseFlags(set, args); err != nil {
		return err
	}
	if *idleClients {
		return bench.IdleClients(ctx, os.Stdin, stdout, stderr)
	}
	if *replot {
		return bench.ReplotHistory(*out)
	}
	if *history != "" {
		sizes, err := parseSizes(*history)
		switch {
		case err != nil:
			return usageError{"--history: " + err.Error()}
		case *queued < 1 || *queued > 10000000:
			return usageError{"--queued must be 1..10000000"}
		case *devices < 1 || *devices > 10000:
			return usageError{"--devices must be 1..10000"}
		case *deviceSlots < 1 || *deviceSlots > 64:
			return usageError{"--device-slots must be 1..64"}
		case *window < time.Second || *window > 10*time.Minute:
			return usageError{"--window must be 1s..10m"}
		case *seedWorkers < 1 || *seedWorkers > 16:
			return usageError{"--seed-workers must be 1..16"}
		case *samples < 1 || *samples > 1000:
			return usageError{"--samples must be 1..1000"}
		}
		rep, err := bench.RunHistory(ctx, bench.HistoryConfig{Sizes: sizes, Queued: *queued, Devices: *devices, Slots: *deviceSlots,
			Window: *window, Warmup: 3 * time.Second, Samples: *samples, Out: *out, PgDir: *pgDir, CheckInvariants: *checkInv, SeedWorkers: *seedWorkers, Log: stderr})
		if rep != nil && len(rep.Points) > 0 {
			if perr := rep.PrintTable(stdout); perr != nil && err == nil {
				err = perr
			}
			fmt.Fprintf(stderr, "bench: wrote %s and %s in %s\n", bench.HistoryReportName, bench.HistoryPlotName, *out)
		}
		return err
	}
	switch {
	case *agents < 1 || *agents > 10000:
		return usageError{"--agents must be 1..10000"}
	case *slots < 1 || *slots > 64:
		return usageError{"--slots must be 1..64"}
	case *clientOnly && (*url == "" || *db == ""):
		return usageError{"--client-only needs --url (the running server) and --db (its database, or DATABASE_URL)"}
	case !*clientOnly && (*url != "" || *metricsURL != "" || *metricsTokenFile != ""):
		return usageError{"--url, --metrics-url and --metrics-token-file are only for --client-only"}
	case *clientOnly && *twoProcess:
		return usageError{"--two-process starts its own server; --client-only uses yours: pick one"}
	case *jobs < 1 || *jobs > 1000000:
		return usageError{"--jobs must be 1..1000000"}
	case *duration <= 0 || *duration > 5*time.Minute:
		return usageError{"--duration must be positive and at most 5m"}
	case *idle < 1 || *idle > 50000:
		return usageError{"--idle-sessions must be 1..50000"}
	case *rounds < 1 || *rounds > 20:
		return usageError{"--rounds must be 1..20"}
	case *pgClients < 1 || *pgClients > 64 || *pgSeconds < 1 || *pgSeconds > 60:
		return usageError{"--pgbench-clients must be 1..64 and --pgbench-seconds 1..60"}
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	metricsToken, err := api.ReadMetricsToken(*metricsTokenFile)
	if err != nil {
		return usageError{err.Error()}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary to run the idle clients' process: %w", err)
	}
	cfg := bench.Config{Agents: *agents, Slots: *slots, TwoProcess: *twoProcess, Jobs: *jobs, Duration: *duration, IdleSessions: *idle,
		PgbenchClients: *pgClients, PgbenchSeconds: *pgSeconds, PgbenchScript: *script, FloorScript: *floorScript, Rounds: *rounds,
		ModelSeconds: d.ModelSeconds, DiffSeconds: d.DiffSeconds, Log: stderr,
		MetricsURL: *metricsURL, MetricsToken: metricsToken}
	// The idle sessions' clients run in a second copy of this binary.
	cfg.IdleClientCommand = []string{self, "bench", "--idle-clients"}
	var res *bench.Result
	if *clientOnly {
		res, err = bench.RunClientOnly(ctx, cfg, *url, *db)
	} else {
		res, err = bench.Run(ctx, cfg)
	}
	if err != nil {
		return err
	}
	if err := res.PrintTable(stdout); err != nil {
		return err
	}
	if *jsonOut != "" {
		if err := res.WriteJSON(*jsonOut); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench: wrote %s\n", *jsonOut)
	}
	return nil
}
