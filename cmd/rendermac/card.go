package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/qualify"
)

const cardUsage = `Usage: rendermac card diff A.json B.json
       rendermac card merge [--out DIR] SHARD.json...

diff   shows what changed between two qualification runs (durations ignored).
merge  joins the JSON cards of one sharded run (qualify --shard 1/N ... N/N, in
       any order) into the card the unsharded run writes (Markdown, JSON, JUnit
       XML, HTML in DIR, default evidence-out): campaign counts summed, scenarios
       and failures in unsharded order, FAIL if any shard failed (exit 1).
       Refuses (exit 2, naming the problem) a missing or repeated shard, a file
       that is not a shard card, and shards of different runs: another commit,
       schema, model or generator version, Go or Postgres version, or other
       flags (anything but --shard).`

// runCard is `rendermac card diff A.json B.json` and
// `rendermac card merge [--out DIR] SHARD.json...`.
func runCard(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, cardUsage)
		return usageError{"missing subcommand"}
	}
	if isHelp(args[0]) || (args[0] == "diff" && len(args) == 2 && isHelp(args[1])) {
		return helpError{cardUsage + "\n"}
	}
	switch args[0] {
	case "diff":
		return runCardDiff(args[1:], stdout)
	case "merge":
		return runCardMerge(args[1:], stdout, stderr)
	}
	return usageError{fmt.Sprintf("unknown subcommand %q (want diff or merge)", args[0])}
}

func runCardDiff(args []string, stdout io.Writer) error {
	if len(args) != 2 {
		return usageError{"want: card diff A.json B.json"}
	}
	a, err := readCard(args[0])
	if err != nil {
		return err
	}
	b, err := readCard(args[1])
	if err != nil {
		return err
	}
	lines, live := evidence.Diff(a, b), evidence.DiffLive(a, b)
	if len(lines) == 0 && len(live) == 0 {
		fmt.Fprintln(stdout, "no differences")
		return nil
	}
	if len(lines) == 0 {
		fmt.Fprintln(stdout, "reproducible sections: no differences")
	}
	for _, l := range lines {
		fmt.Fprintln(stdout, l)
	}
	if len(live) > 0 {
		fmt.Fprintln(stdout, "live measurements (real processes; they vary between runs of one commit):")
		for _, l := range live {
			fmt.Fprintln(stdout, "  "+l)
		}
	}
	return nil
}

// runCardMerge merges shard cards and writes the merged card; it exits 1
// when the merged verdict is FAIL, as qualify would have.
func runCardMerge(args []string, stdout, stderr io.Writer) error {
	out, paths, err := parseCardMergeFlags(args, stderr)
	if err != nil {
		return err
	}
	shards := make([]evidence.ShardCard, 0, len(paths))
	for _, p := range paths {
		c, err := readCard(p)
		if err != nil {
			return err
		}
		shards = append(shards, evidence.ShardCard{Name: p, Card: c})
	}
	merged, err := evidence.Merge(shards)
	if err != nil {
		return usageError{err.Error()}
	}
	written, err := evidence.WriteAll(out, merged, evidence.WriteOptions{NoTimings: merged.NoTimings})
	if err != nil {
		return err
	}
	verdict := "PASS"
	if !merged.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(stdout, "merged %d shards: qualification %s: %d campaigns, %d scenarios, %d failures\n",
		len(shards), verdict, len(merged.Campaigns), len(merged.Scenarios), len(merged.Failures))
	for _, p := range written {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	if err := githubActions(merged, written, os.Getenv, stdout); err != nil {
		return err
	}
	if !merged.Passed {
		return exitError{1}
	}
	return nil
}

// parseCardMergeFlags reads card merge's flags and its SHARD.json operands.
func parseCardMergeFlags(args []string, stderr io.Writer) (out string, paths []string, err error) {
	fs := newFlagSet("card merge", "[--out DIR] SHARD.json...", stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nFlags of card merge:\n", cardUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&out, "out", "evidence-out", "directory for the merged card (Markdown, JSON, JUnit XML, HTML)")
	if paths, err = parseWithOperands(fs, args); err != nil {
		return "", nil, err
	}
	if len(paths) == 0 {
		return "", nil, usageError{"want: card merge [--out DIR] SHARD.json... (the JSON cards of qualify --shard 1/N ... N/N)"}
	}
	return out, paths, nil
}

// parseWithOperands parses flags anywhere among the operands (card merge
// a.json b.json --out DIR) and returns the operands in order.
func parseWithOperands(fs *flag.FlagSet, args []string) ([]string, error) {
	var operands []string
	for {
		if err := parseQuietly(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return operands, nil
		}
		operands = append(operands, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func readCard(path string) (evidence.Card, error) {
	f, err := os.Open(path)
	if err != nil {
		return evidence.Card{}, usageError{err.Error()}
	}
	defer f.Close()
	c, err := evidence.ReadJSON(f)
	if err != nil {
		return c, usageError{fmt.Sprintf("%s: %v", path, err)}
	}
	return c, nil
}

// runReplay is `rendermac replay FILE`: FILE is a card's JSON twin (every
// failure in it with a recorded sequence is replayed) or a replay file.
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("replay", "FILE (a card .json or a replay .txt)", stderr)
	db := fs.String("db", os.Getenv("DATABASE_URL"), "Postgres URL for sequences that ran against Postgres")
	force := fs.Bool("force", false, "replay what another build (commit, schema, model, generator) recorded")
	if err := parseQuietly(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"want exactly one FILE"}
	}
	path := fs.Arg(0)
	if !strings.HasSuffix(path, ".json") {
		return runFuzz(ctx, []string{"--replay", path, "--db", *db, "--force=" + strconv.FormatBool(*force)}, stdout, stderr)
	}
	card, err := readCard(path)
	if err != nil {
		return err
	}
	if err := checkProvenance(path, card.Run.Build, *force, stderr); err != nil {
		return err
	}
	reproduced := 0
	for _, fl := range card.Failures {
		if len(fl.Events) == 0 {
			continue
		}
		rf := fuzz.ReplayFile{Target: fl.Target, Variant: fl.Variant}
		rf.Seq.Seed = fl.Seed
		for i, line := range fl.Events {
			ev, err := fuzz.ParseEvent(line)
			if err != nil {
				return usageError{fmt.Sprintf("%s: failure %s event %d: %v", path, fl.Source, i, err)}
			}
			rf.Seq.Events = append(rf.Seq.Events, ev)
		}
		t := qualify.Target{Target: fl.Target, Variant: fl.Variant, DB: *db, Workers: 1}
		setup, cleanup, err := t.Open(ctx, stderr)
		if err != nil {
			return usage(err)
		}
		fmt.Fprintf(stdout, "%s seed %d:\n", fl.Source, fl.Seed)
		err = replaySequence(ctx, t.Target, setup, rf, stdout)
		cleanup()
		if _, failed := err.(exitError); failed {
			reproduced++
		} else if err != nil {
			return err
		}
	}
	if reproduced == 0 {
		fmt.Fprintln(stdout, "no recorded failure reproduced")
		return nil
	}
	fmt.Fprintf(stdout, "%d recorded failure(s) reproduced\n", reproduced)
	return exitError{1}
}
