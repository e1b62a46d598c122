package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/qualify"
	"github.com/rendermac/rendermac/internal/pgprovider"
)

// Every shrunk failure kept in testdata/regressions (a `fuzz` failure file,
// its header comment saying what it caught) replays clean against the
// targets it names, as `rendermac fuzz --replay FILE --force` runs it: each
// was written by a build that failed it, hence forced past provenance.
func TestRegressionsReplayClean(t *testing.T) {
	files, err := filepath.Glob("testdata/regressions/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	ctx := context.Background()
	pg, err := pgprovider.Open(ctx, pgprovider.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pg.Close()) })
	for _, path := range files {
		rf, err := readReplay(path)
		require.NoError(t, err)
		fac, cleanup, err := qualify.Target{Target: rf.Target, Variant: rf.Variant, DB: pg.AdminURL(), Workers: 1}.Open(ctx, io.Discard)
		require.NoError(t, err, path)
		res, err := fuzz.Run(ctx, fac.Factory, 0, rf.Seq, fac.Options)
		cleanup()
		require.NoError(t, err, path)
		if res.Failure != nil {
			t.Fatalf("%s: %s\nreplay: go run -tags faultpoints,mutations ./cmd/rendermac fuzz --replay cmd/rendermac/%s --force",
				path, res.Failure, path)
		}
		require.Equal(t, len(rf.Seq.Events), res.Steps, path)
	}
}
