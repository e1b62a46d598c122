// Command rendermac is the RenderMac control plane, Mac agent and
// qualification harness in one binary. See `rendermac help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// command is one subcommand: its one-line summary and its entry point.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"fuzz", "run a seeded fuzz campaign against the model and/or Postgres", runFuzz},
		{"scenarios", "run the named phase-fault scenario catalogue against the full stack", runScenarios},
		{"qualify", "run the qualification campaigns and write the dated evidence card", runQualify},
		{"mutate", "run the source mutation campaign: each mutant through the bounded qualify gate", runMutate},
		{"replay", "replay the failures recorded in a card's JSON, or a replay file", runReplay},
		{"rules", "list the contract's rules with the checks of qualify and the mutants that reach each", runRules},
		{"card", "compare two qualification cards (card diff A B) or merge shard cards (card merge SHARDS...)", runCard},
		{"bench", "load the whole stack beside pgbench and check the performance goals", runBench},
		{"soak", "run the whole stack under load with random faults, then check nothing was lost", runSoak},
		{"fleet", "run rendermac server and agent processes under Mac faults (sleep, Wi-Fi loss, full disk, gateway and Postgres kills), then check", runFleet},
		{"server", "run the control plane: HTTP API, device gateway, sweeper, webhooks", runServer},
		{"migrate", "apply the database migrations (server also does on start)", runMigrate},
		{"admin", "operator tasks: buyers, API keys, pairing codes, devices, signing keys", runAdmin},
		{"dev", "run a throwaway local control plane with a demo buyer and pairing code", runDev},
		{"agent", "run the Mac agent: pair a device or serve leases from the gateway", runAgent},
	}
}

// usageError marks a bad invocation: exit 2 with the message.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// exitError carries an exit code for an outcome that was already reported
// (a campaign that found a failure exits 1 without another message).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printHelp(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var ue usageError
		var ee exitError
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "rendermac %s: %s\nRun 'rendermac %s --help' for usage.\n", c.name, ue.msg, c.name)
			return 2
		case errors.As(err, &ee):
			return ee.code
		default:
			fmt.Fprintf(stderr, "rendermac %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "rendermac: unknown command %q\n\n", args[0])
	printHelp(stderr)
	return 2
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "rendermac: fenced, pull-leased media workers and the harness that proves them.")
	fmt.Fprintln(w, "\nUsage: rendermac <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'rendermac <command> --help' for a command's flags.")
}

// campaignGC lets a campaign's heap grow to five times its live data
// between collections (GOGC=400) unless GOGC is set. A campaign's live heap
// is a few megabytes, so at the default the collector ran every few
// milliseconds, for 7% of a model-vs-Postgres campaign's own CPU, to keep
// memory at a level nobody needs (50 MB at most either way).
func campaignGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// newFlagSet returns a flag set that reports errors instead of exiting, with
// a usage text that names the command.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: rendermac %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// variantFlag registers name, the flag that selects a deliberately broken
// variant, and old, its name before the variants were called variants
// (issue 26), as a deprecated alias writing the same value: scripts that
// pass --mutation, --server-mutation or --model-mutation keep working.
func variantFlag(fs *flag.FlagSet, p *string, name, old, usage string) {
	fs.StringVar(p, name, "", usage)
	fs.StringVar(p, old, "", "deprecated alias of --"+name)
}

// parseFlags parses args, turning a bad flag into a usageError.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}
