package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/rendermac/rendermac/evidence"
	"github.com/rendermac/rendermac/faults"
)

// runCard is `rendermac card diff A.json B.json`.
func runCard(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "Usage: rendermac card diff A.json B.json\n\nShows what changed between two qualification runs (durations ignored).")
		if len(args) == 0 {
			return usageError{"missing subcommand"}
		}
		return nil
	}
	if args[0] != "diff" || len(args) != 3 {
		return usageError{"want: card diff A.json B.json"}
	}
	a, err := readCard(args[1])
	if err != nil {
		return err
	}
	b, err := readCard(args[2])
	if err != nil {
		return err
	}
	lines := evidence.Diff(a, b)
	if len(lines) == 0 {
		fmt.Fprintln(stdout, "no differences")
		return nil
	}
	for _, l := range lines {
		fmt.Fprintln(stdout, l)
	}
	return nil
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
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
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
		rf := faults.ReplayFile{Target: fl.Target, Mutation: fl.Mutation}
		rf.Seq.Seed = fl.Seed
		for i, line := range fl.Events {
			ev, err := faults.ParseEvent(line)
			if err != nil {
				return usageError{fmt.Sprintf("%s: failure %s event %d: %v", path, fl.Source, i, err)}
			}
			rf.Seq.Events = append(rf.Seq.Events, ev)
		}
		f := fuzzFlags{target: fl.Target, mutation: fl.Mutation, db: *db, workers: 1}
		setup, cleanup, err := fuzzFactory(ctx, f, stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s seed %d:\n", fl.Source, fl.Seed)
		err = replaySequence(ctx, f, setup, rf, stdout)
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
