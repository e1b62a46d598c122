//go:build !faultpoints

package faultpoint_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/faultpoint"
)

// In the default build a hit is free and nothing can be armed.
func TestHitIsANoOpInTheDefaultBuild(t *testing.T) {
	require.False(t, faultpoint.Enabled)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	allocs := testing.AllocsPerRun(100, func() {
		for _, n := range faultpoint.Names() {
			faultpoint.Hit(ctx, n)
		}
	})
	// Names copies its slice once per run; Hit itself allocates nothing.
	require.LessOrEqual(t, allocs, 1.0)
	require.Empty(t, faultpoint.Armed())
}

// A binary without the tag must not start as if a fault were armed.
func TestEnableFromEnvRefusesInTheDefaultBuild(t *testing.T) {
	t.Setenv(faultpoint.EnvVar, "")
	require.NoError(t, faultpoint.EnableFromEnv())

	t.Setenv(faultpoint.EnvVar, faultpoint.CommitBeforeTx2+"=kill")
	err := faultpoint.EnableFromEnv()
	require.Error(t, err)
	require.Contains(t, err.Error(), "built without -tags faultpoints")
	require.True(t, strings.Contains(err.Error(), faultpoint.EnvVar))
	require.Empty(t, faultpoint.Armed())
	faultpoint.Hit(context.Background(), faultpoint.CommitBeforeTx2) // still nothing: the test process lives on
}
