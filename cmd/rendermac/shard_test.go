package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/internal/pgprovider"
)

// qualifyInto runs qualify with args into dir and returns its four files
// by suffix (.md, .json, -junit.xml, .html); wantFail expects exit 1.
func qualifyInto(t *testing.T, dir string, wantFail bool, args ...string) map[string][]byte {
	t.Helper()
	var so, se bytes.Buffer
	// The shard tests are about the model's seeds: no linearizability
	// rounds (evidence's merge tests cover that section's merge).
	err := runQualify(context.Background(), append(slices.Clone(args), "--no-fleet", "--linearize-rounds", "0", "--out", dir), &so, &se)
	if wantFail {
		require.Equal(t, exitError{1}, err, "stdout:\n%s\nstderr:\n%s", so.String(), se.String())
	} else {
		require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", so.String(), se.String())
	}
	return cardFiles(t, dir)
}

func cardFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	md, err := filepath.Glob(filepath.Join(dir, "*-phase-fault-qualification.md"))
	require.NoError(t, err)
	require.Len(t, md, 1, "one card in %s", dir)
	base := strings.TrimSuffix(md[0], ".md")
	files := map[string][]byte{}
	for _, suffix := range []string{".md", ".json", "-junit.xml", ".html"} {
		data, err := os.ReadFile(base + suffix)
		require.NoError(t, err)
		files[suffix] = data
	}
	return files
}

// mergeShards runs qualify once per shard (in reverse order: merge must
// not depend on the order it is given the cards) and card merge on their
// JSON cards, returning the merged card's files and merge's error.
func mergeShards(t *testing.T, dir string, n int, wantFail bool, args ...string) (map[string][]byte, error) {
	t.Helper()
	var cards []string
	for k := n; k >= 1; k-- {
		sh := fmt.Sprintf("%d/%d", k, n)
		out := filepath.Join(dir, fmt.Sprintf("shard-%d", k))
		shard := qualifyInto(t, out, wantFail, append(slices.Clone(args), "--shard", sh)...)
		require.Contains(t, string(shard[".md"]), "- Shard: "+sh+" ")
		js, err := filepath.Glob(filepath.Join(out, "*-qualification.json"))
		require.NoError(t, err)
		cards = append(cards, js...)
	}
	merged := filepath.Join(dir, "merged")
	var so, se bytes.Buffer
	err := runCard(context.Background(), append(append([]string{"merge"}, cards...), "--out", merged), &so, &se)
	if err != nil && err != (exitError{1}) {
		return nil, err
	}
	return cardFiles(t, merged), err
}

// The equality test of issue 11: qualify --shard 1/2 and 2/2, merged, is
// the unsharded card byte for byte in every format. Every campaign kind
// runs, both determinism samples (shard 1's slice of the Postgres one is
// empty), and two scenarios, one a shard. Runs this small leave required
// coverage cells unreached: the unsharded run fails its coverage gate,
// the shards defer it (and pass), and the merge fails it on the sums.
func TestQualifyShardsMergeToTheUnshardedCard(t *testing.T) {
	args := []string{"--seeds", "5", "--steps", "20", "--determinism-seeds", "3",
		"--pg-seeds", "2", "--pg-steps", "12", "--determinism-pg-seeds", "1", "--stack-seeds", "2", "--stack-steps", "6",
		"--scenarios", "wrong_epoch,cancel_during_verification", "--s3-scenarios", "late_upload_after_commit",
		"--no-timings", "--workers", "1"}
	// One server for all three runs (--db; the card does not record it):
	// a cluster per campaign would cost more than the campaigns.
	pg, err := pgprovider.Open(context.Background(), pgprovider.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pg.Close()) })
	args = append(args, "--db", pg.AdminURL())
	dir := t.TempDir()
	whole := qualifyInto(t, filepath.Join(dir, "whole"), true, args...)
	merged, err := mergeShards(t, dir, 2, false, args...)
	require.Equal(t, exitError{1}, err, "the merged card fails the coverage gate as the unsharded run does")
	for _, suffix := range []string{".md", ".json", "-junit.xml", ".html"} {
		require.Equal(t, string(whole[suffix]), string(merged[suffix]), "merged %s differs from the unsharded card", suffix)
	}
	card, err := evidence.ReadJSON(bytes.NewReader(whole[".json"]))
	require.NoError(t, err)
	require.False(t, card.Passed)
	gated := 0
	for _, fl := range card.Failures {
		require.True(t, strings.HasPrefix(fl.Source, "coverage: "), "only the coverage gate fails: %+v", fl)
		gated++
	}
	require.Equal(t, 3, gated, "each fuzz campaign's gate")
	require.Len(t, card.Campaigns, 5)
	// Without -tags faultpoints, cancel_during_verification is a
	// not-covered note instead of a row: merged notes are checked too.
	ran := len(card.Scenarios)
	for _, note := range card.NotCovered {
		if strings.HasPrefix(note, "Scenario ") && strings.Contains(note, " was not run") {
			ran++
		}
	}
	require.Equal(t, 3, ran, "every selected scenario is a row or a not-run note, the S3 one too")
	require.Contains(t, string(whole[".md"]), "late_upload_after_commit@s3", "the S3 run is its own row")
	require.Contains(t, string(whole[".md"]), "stack (artifacts: fs)", "the stack campaign names its artifact store")
	require.Equal(t, 5, card.Campaigns[0].Seeds)
}

// A broken model fails in both shards: the merged card is FAIL with the
// unsharded run's failures in its order, every replay command without
// --shard, and differs from the unsharded card only where each shard
// shrank its own first failing seed.
func TestQualifyFailingShardsMergeToAFailingCard(t *testing.T) {
	args := []string{"--seeds", "6", "--steps", "100", "--determinism-seeds", "0", "--pg-seeds", "0", "--stack-seeds", "0",
		"--no-scenarios", "--no-timings", "--workers", "1", "--model-variant", "keep_slot"}
	dir := t.TempDir()
	whole, err := evidence.ReadJSON(bytes.NewReader(qualifyInto(t, filepath.Join(dir, "whole"), true, args...)[".json"]))
	require.NoError(t, err)
	files, err := mergeShards(t, dir, 2, true, args...)
	require.Equal(t, exitError{1}, err, "a FAIL merged card exits 1")
	merged, err := evidence.ReadJSON(bytes.NewReader(files[".json"]))
	require.NoError(t, err)
	require.False(t, merged.Passed)
	require.Equal(t, whole.Campaigns, merged.Campaigns)
	require.Equal(t, len(whole.Failures), len(merged.Failures))
	require.GreaterOrEqual(t, len(whole.Failures), 2, "the mutant fails more than one seed, or this test shows nothing")
	shrunk := 0
	for i, fl := range merged.Failures {
		require.Equal(t, whole.Failures[i].Seed, fl.Seed)
		require.NotContains(t, fl.Replay, "--shard")
		if len(fl.Events) > 0 {
			shrunk++
			continue
		}
		require.Equal(t, whole.Failures[i], fl)
	}
	// The first failure is shrunk the same way; its replay file sits in
	// the directory of the run that wrote it.
	first, mergedFirst := whole.Failures[0], merged.Failures[0]
	require.Contains(t, first.Replay, filepath.Join("whole", "replays", "model-seed-"))
	require.Contains(t, mergedFirst.Replay, filepath.Join("shard-1", "replays", "model-seed-"))
	first.Replay, mergedFirst.Replay = "", ""
	require.Equal(t, first, mergedFirst)
	require.LessOrEqual(t, shrunk, 2)
}

func TestCardMergeRefusesWithExit2(t *testing.T) {
	dir := t.TempDir()
	notCard := filepath.Join(dir, "notes.json")
	require.NoError(t, os.WriteFile(notCard, []byte(`{"hello": 1}`), 0o644))
	var so, se bytes.Buffer
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"merge"}, "want: card merge"},
		{[]string{"merge", notCard}, `notes.json: read evidence card: json: unknown field "hello"`},
		{[]string{"merge", filepath.Join(dir, "missing.json")}, "missing.json: no such file"},
		{[]string{"merge", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"frob"}, `unknown subcommand "frob"`},
	} {
		err := runCard(context.Background(), tc.args, &so, &se)
		var ue usageError
		require.ErrorAs(t, err, &ue, "%v", tc.args)
		require.Contains(t, ue.msg, tc.want)
	}
	// A card that is not a shard: Merge's refusal comes back as a usage error.
	whole := evidence.Card{Title: "t", Date: "2026-12-03", Passed: true, NoTimings: true}
	paths, err := evidence.WriteAll(dir, whole, evidence.WriteOptions{NoTimings: true})
	require.NoError(t, err)
	err = runCard(context.Background(), []string{"merge", paths[1]}, &so, &se)
	var ue usageError
	require.ErrorAs(t, err, &ue)
	require.Contains(t, ue.msg, "is not a shard card")
}

func TestShardFlagRefusesBadValues(t *testing.T) {
	for _, bad := range []string{"0/2", "3/2", "x/y", "1/0"} {
		var so, se bytes.Buffer
		for _, cmd := range []func(context.Context, []string, io.Writer, io.Writer) error{runQualify, runFuzz} {
			err := cmd(context.Background(), []string{"--shard", bad}, &so, &se)
			var ue usageError
			require.ErrorAs(t, err, &ue, bad)
			require.Contains(t, ue.msg, `invalid value "`+bad+`" for flag -shard: shard "`+bad+`"`)
		}
	}
	var so, se bytes.Buffer
	err := runFuzz(context.Background(), []string{"--shard", "1/2", "--seed", "3"}, &so, &se)
	require.ErrorContains(t, err, "--shard slices a --seeds campaign")
}
