package main

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// The agent command dev prints runs this binary again the way the user
// started it.
func TestSelfCommand(t *testing.T) {
	t.Parallel()
	noPath := func(string) (string, error) { return "", errors.New("not found") }
	for _, tc := range []struct {
		exe        string
		lookPath   func(string) (string, error)
		moduleRoot bool
		want       string
	}{
		{"/tmp/go-build1234/b001/exe/rendermac", noPath, true, "go run ./cmd/rendermac"},
		{"/root/.cache/go-build/38/38ba54d0-d/rendermac", noPath, true, "go run ./cmd/rendermac"},
		{"/root/.cache/go-build/38/38ba54d0-d/rendermac", noPath, false, "go run github.com/rendermac/rendermac/cmd/rendermac"},
		{"/opt/bin/rendermac", noPath, true, "/opt/bin/rendermac"},
	} {
		require.Equal(t, tc.want, selfCommandFor(tc.exe, tc.lookPath, tc.moduleRoot), tc.exe)
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	onPath := func(string) (string, error) { return exe, nil }
	require.Equal(t, "rendermac", selfCommandFor(exe, onPath, true), "rendermac on PATH is this file")
}
