package main

import (
	"bytes"
	"context"
	"errors"
	"github.com/rendermac/rendermac/harness/fuzz"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/evidence"
)

// modelQualify runs a model-only qualify (no Postgres) with extra flags and
// returns its error, stderr and card.
func modelQualify(t *testing.T, extra ...string) (error, string, evidence.Card) {
	t.Helper()
	out := t.TempDir()
	args := append([]string{"--seeds", "150", "--steps", "200", "--pg-seeds", "0", "--stack-seeds", "0", "--linearize-rounds", "0", "--no-scenarios",
		"--determinism-seeds", "0", "--no-timings", "--no-fleet", "--workers", "1", "--out", out}, extra...)
	var so, se bytes.Buffer
	err := runQualify(context.Background(), args, &so, &se)
	js, globErr := filepath.Glob(filepath.Join(out, "*-qualification.json"))
	require.NoError(t, globErr)
	require.Len(t, js, 1, "stdout: %s\nstderr: %s", so.String(), se.String())
	f, openErr := os.Open(js[0])
	require.NoError(t, openErr)
	defer f.Close()
	card, readErr := evidence.ReadJSON(f)
	require.NoError(t, readErr)
	return err, se.String(), card
}

// The coverage gate fails a campaign that never drew an op: the same shape
// passes with the default weights, and with cancel weighted 0 the card and
// stderr name exactly what only a cancel reaches.
func TestCoverageGateFailsOnWeightZero(t *testing.T) {
	err, stderr, card := modelQualify(t)
	require.NoError(t, err, stderr)
	require.True(t, card.Passed)
	require.Empty(t, card.Campaigns[0].Coverage.Unreached())

	err, stderr, card = modelQualify(t, "--weight", "cancel=0")
	var ee exitError
	require.True(t, errors.As(err, &ee), "want exit 1, got %v", err)
	require.Equal(t, 1, ee.code)
	require.False(t, card.Passed)
	require.False(t, card.Campaigns[0].Passed)
	require.Contains(t, card.Run.GeneratorWeights, "cancel=0")
	var gate *evidence.Failure
	for i := range card.Failures {
		if card.Failures[i].Source == evidence.CoverageSource("model") {
			gate = &card.Failures[i]
		}
	}
	require.NotNil(t, gate, "no coverage failure on the card: %+v", card.Failures)
	for _, cell := range []string{"job transition active->cancelling", "job transition queued->cancelled",
		"attempt transition committing->cancelled", "reply cancelled", "reply cancelling",
		"reply lease_conflict/job_cancelling", "fault foreign_buyer"} {
		require.Contains(t, gate.Detail, cell)
		require.Contains(t, stderr, cell)
	}
	for _, reached := range []string{"reply commit_ok", "fault wrong_epoch", "attempt transition uploading->committing"} {
		require.NotContains(t, gate.Detail, reached)
	}
	require.Contains(t, stderr, "coverage gate FAIL: model")
}

// A bad --weight is a usage error (exit 2) naming what is wrong.
func TestWeightFlagErrors(t *testing.T) {
	for arg, want := range map[string]string{
		"teleport=3":  `unknown op "teleport"`,
		"commit=-1":   "N must be an integer from 0 to 1000",
		"commit=1001": "N must be an integer from 0 to 1000",
		"commit":      "want op=N",
	} {
		for _, cmd := range []func(context.Context, []string, *bytes.Buffer, *bytes.Buffer) error{
			func(ctx context.Context, a []string, o, e *bytes.Buffer) error { return runFuzz(ctx, a, o, e) },
			func(ctx context.Context, a []string, o, e *bytes.Buffer) error { return runQualify(ctx, a, o, e) },
		} {
			var so, se bytes.Buffer
			err := cmd(context.Background(), []string{"--weight", arg}, &so, &se)
			var ue usageError
			require.True(t, errors.As(err, &ue), "--weight %s: want a usage error, got %v", arg, err)
			require.Contains(t, err.Error(), want)
		}
	}
	var all []string
	for _, op := range fuzz.OpNames() {
		all = append(all, "--weight", op+"=0")
	}
	var so, se bytes.Buffer
	err := runFuzz(context.Background(), all, &so, &se)
	require.ErrorContains(t, err, "every op weight is 0")
}
