package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/harness/fuzz"
)

func TestRecordedCommandLeavesOutWhereAndWhichDatabase(t *testing.T) {
	got := recordedCommand("qualify", []string{"--seeds", "5", "--out", "/tmp/a", "--db=postgres://u:secret@h/db",
		"-out=/x", "--no-timings", "--db", "postgres://u:pw@h/db", "--shard", "2/3", "-shard=1/3"})
	require.Equal(t, "rendermac qualify --seeds 5 --no-timings", got)
}

// Two deterministic runs into different directories write byte-identical
// cards (model campaign only: no Postgres needed).
func TestQualifyCardDoesNotDependOnOut(t *testing.T) {
	var cards [2][]byte
	for i := range cards {
		out := filepath.Join(t.TempDir(), "evidence-"+string(rune('a'+i)))
		var so, se bytes.Buffer
		err := runQualify(context.Background(), []string{"--seeds", "3", "--steps", "20", "--pg-seeds", "0", "--stack-seeds", "0",
			"--linearize-rounds", "0", "--no-scenarios", "--no-timings", "--no-coverage-gate", "--no-fleet", "--workers", "1", "--out", out}, &so, &se)
		require.NoError(t, err, se.String())
		md, err := filepath.Glob(filepath.Join(out, "*-qualification.md"))
		require.NoError(t, err)
		require.Len(t, md, 1)
		js, err := os.ReadFile(strings.TrimSuffix(md[0], ".md") + ".json")
		require.NoError(t, err)
		m, err := os.ReadFile(md[0])
		require.NoError(t, err)
		cards[i] = append(m, js...)
	}
	require.Equal(t, string(cards[0]), string(cards[1]))
}

// A card or replay file from another build is refused with exit 2 (a
// usageError) naming what differs, and --force runs it anyway.
func TestReplayRefusesAnotherBuild(t *testing.T) {
	dir := t.TempDir()
	cur := currentBuild()
	card := evidence.Card{Title: "t", Date: "2026-12-03", Passed: true, NoTimings: true,
		Run: evidence.RunInfo{Build: cur}}
	card.Run.Commit = "0123456789abcdef0123456789abcdef01234567"
	paths, err := evidence.WriteAll(dir, card, evidence.WriteOptions{NoTimings: true})
	require.NoError(t, err)
	var cardPath string
	for _, p := range paths {
		if strings.HasSuffix(p, ".json") {
			cardPath = p
		}
	}
	require.NotEmpty(t, cardPath)
	var so, se bytes.Buffer
	err = runReplay(context.Background(), []string{cardPath}, &so, &se)
	var ue usageError
	require.ErrorAs(t, err, &ue)
	require.Contains(t, ue.msg, "commit: recorded 0123456789abcdef0123456789abcdef01234567, this build "+cur.Commit)
	require.Contains(t, ue.msg, "--force")
	require.NoError(t, runReplay(context.Background(), []string{"--force", cardPath}, &so, &se))
	require.Contains(t, se.String(), "--force: replaying anyway")

	// A replay file with another generator.
	rf := fuzz.ReplayFile{Target: "model", Build: cur, Seq: fuzz.Generate(1, 5, fuzz.DefaultGenConfig)}
	rf.Build.GeneratorVersion = "0+000000000000"
	txt := filepath.Join(dir, "model-seed-1.txt")
	f, err := os.Create(txt)
	require.NoError(t, err)
	require.NoError(t, fuzz.WriteReplay(f, rf))
	require.NoError(t, f.Close())
	err = runReplay(context.Background(), []string{txt}, &so, &se)
	require.ErrorAs(t, err, &ue)
	require.Contains(t, ue.msg, "generator version: recorded 0+000000000000")
}
