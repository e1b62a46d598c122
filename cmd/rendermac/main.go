// Command rendermac is the RenderMac control plane, Mac agent and
// qualification harness in one binary. See `rendermac help`.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
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
		{"jobs", "a buyer's jobs: submit (with an input file), get, list, cancel, events, wait, download", runJobs},
		{"version", "print the module version, commit and build tags of this binary", runVersion},
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
	switch {
	case len(args) >= 2 && args[0] == "help": // rendermac help CMD [SUB]: CMD [SUB] --help
		return run(ctx, append(args[1:len(args):len(args)], "--help"), stdout, stderr)
	case len(args) == 0 || isHelp(args[0]) || args[0] == "help":
		printHelp(stdout)
		return 0
	case args[0] == "--version" || args[0] == "-version":
		args = []string{"version"}
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var ue usageError
		var ee exitError
		var he helpError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &he):
			fmt.Fprint(stdout, he.usage)
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

// helpGroup is one heading of `rendermac help` and its commands in order.
type helpGroup struct {
	title string
	names []string
}

// helpGroups orders `rendermac help`: what an operator runs first, then the
// harness that proves it. A command no group names is listed under the last
// group (TestHelpGroupsEveryCommand fails until it is placed).
var helpGroups = []helpGroup{
	{"Run a farm", []string{"server", "agent", "dev", "admin", "migrate"}},
	{"Use a farm (buyers)", []string{"jobs"}},
	{"Prove it (the harness)", []string{"qualify", "fuzz", "scenarios", "rules", "mutate", "replay", "card", "bench", "soak", "fleet"}},
	{"This binary", []string{"version"}},
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "rendermac: fenced, pull-leased media workers and the harness that proves them.")
	fmt.Fprintln(w, "\nUsage: rendermac <command> [flags]")
	byName := map[string]command{}
	for _, c := range commands() {
		byName[c.name] = c
	}
	for i, g := range helpGroups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		names := g.names
		if i == len(helpGroups)-1 {
			names = append(slices.Clone(names), ungrouped()...)
		}
		for _, n := range names {
			if c, ok := byName[n]; ok {
				fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
			}
		}
	}
	fmt.Fprintln(w, "\nRun 'rendermac <command> --help' (or 'rendermac help <command>') for a command's flags.")
}

// ungrouped are the commands no help group names, in commands() order.
func ungrouped() []string {
	var out []string
	for _, c := range commands() {
		if !slices.ContainsFunc(helpGroups, func(g helpGroup) bool { return slices.Contains(g.names, c.name) }) {
			out = append(out, c.name)
		}
	}
	return out
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
		fmt.Fprintf(fs.Output(), "Usage: rendermac %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// helpError is a request for a command's usage (-h, --help): run prints
// the usage on stdout and exits 0, as tools people know do. It is
// flag.ErrHelp to errors.Is.
type helpError struct{ usage string }

func (e helpError) Error() string        { return flag.ErrHelp.Error() }
func (e helpError) Is(target error) bool { return target == flag.ErrHelp }

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// parseQuietly parses args into fs without letting the flag package print:
// a help request comes back as a helpError carrying the usage, a bad flag
// as a usageError that run reports once (the flag package would print the
// error and the whole usage on stderr, then run the error again).
func parseQuietly(fs *flag.FlagSet, args []string) error {
	var usage bytes.Buffer
	out := fs.Output()
	fs.SetOutput(&usage)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return helpError{usage.String()}
	case err != nil:
		return usageError{err.Error()}
	}
	return nil
}

// machineDefault makes the usage text of flag name show text instead of a
// default computed from this machine (its CPUs), so that the usage, and
// docs/cli.md generated from it, read the same everywhere.
func machineDefault(fs *flag.FlagSet, name, text string) {
	fs.Lookup(name).DefValue = text
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
	if err := parseQuietly(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}
