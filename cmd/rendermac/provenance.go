package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/model"
	"github.com/rendermac/rendermac/internal/provenance"
	"github.com/rendermac/rendermac/internal/vcsstamp"
	"github.com/rendermac/rendermac/server/store"
)

// currentBuild is this binary's provenance, recorded on cards and replay
// files and compared by replay.
func currentBuild() provenance.Build {
	commit, dirty := vcsstamp.Commit()
	return provenance.Current(commit, dirty, store.SchemaVersion(), model.ModelVersion(), fuzz.GeneratorVersion())
}

// checkProvenance refuses (exit 2) to replay what another build recorded,
// naming each difference, unless force is set; a dirty tree on either
// side is only noted.
func checkProvenance(what string, rec provenance.Build, force bool, stderr io.Writer) error {
	cur := currentBuild()
	if note := provenance.DirtyNote(rec, cur); note != "" {
		fmt.Fprintln(stderr, note)
	}
	diffs := provenance.Mismatch(rec, cur)
	if len(diffs) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s was made by another build:\n  %s", what, strings.Join(diffs, "\n  "))
	if force {
		fmt.Fprintf(stderr, "%s\n--force: replaying anyway; a result may not mean what it meant\n", msg)
		return nil
	}
	return usageError{msg + "\nreplay it with the build that made it (git checkout " + shortCommit(rec.Commit) +
		"), or pass --force to try anyway"}
}

func shortCommit(c string) string {
	if c == "" {
		return "<unknown commit>"
	}
	return c[:min(len(c), 12)]
}

// recordedCommand is the command line a card records: the flags that say
// what was run. Where the files went (--out) and which database (--db, a
// URL that may carry a password) are left out, so the card does not depend
// on them and never holds a secret; so is --shard, which the card records
// on its own (RunInfo.Shard), so that every shard of one run, and the card
// merged from them, records the command of the unsharded run.
func recordedCommand(name string, args []string) string {
	kept := []string{"rendermac", name}
	for i := 0; i < len(args); i++ {
		a := args[i]
		flagName, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (flagName == "out" || flagName == "db" || flagName == "shard") {
			if !hasValue {
				i++ // the value is the next argument
			}
			continue
		}
		kept = append(kept, a)
	}
	return strings.Join(kept, " ")
}
