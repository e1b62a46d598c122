package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Retention ages take days as well as Go durations; off and 0 turn it
// off; anything else is refused naming the flag.
func TestParseAge(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"90d": 90 * 24 * time.Hour, "0d": 0, "36h": 36 * time.Hour, "1h30m": 90 * time.Minute, "off": 0, "0": 0, "": 0,
	} {
		got, err := parseAge("--retain-finished", in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"-1d", "-2h", "1.5d", "d", "ninety days", "99999999d"} {
		_, err := parseAge("--retain-finished", in)
		require.ErrorContains(t, err, "--retain-finished", in)
	}
}
