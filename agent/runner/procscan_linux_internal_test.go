//go:build linux

package runner

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The states /proc shows for a process of a group right after kill(-pgid,
// SIGKILL) returned (read on this kernel: a sleep child of a killed sh,
// scanned once its leader was reaped): none of them can run code again,
// so none counts as a process that outlived the kill. Only the first,
// sleeping with no SIGKILL pending, is alive.
func TestAliveAfterSIGKILL(t *testing.T) {
	t.Parallel()
	const none = "SigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n"
	for _, tc := range []struct {
		name, stat, status string
		alive              bool
	}{
		{"sleeping", "12 (sleep) S 1 10 10 0 -1 4194304 0", none, true},
		{"SIGKILL pending, not yet scheduled", "12 (sleep) R 1 10 10 0 -1 4194304 0",
			"SigPnd:\t0000000000000100\nShdPnd:\t0000000000000100\n", false},
		{"SIGKILL shared-pending only", "12 (sleep) R 1 10 10 0 -1 4194368 0",
			"SigPnd:\t0000000000000000\nShdPnd:\t0000000000000100\n", false},
		{"mid-exit (PF_EXITING), files closed, not yet a zombie", "12 (sleep) R 1 10 10 0 -1 4195340 0", none, false},
		{"zombie", "12 (sleep) Z 1 10 10 0 -1 4228108 0", none, false},
		{"SIGTERM pending is not death", "12 (sh) S 1 10 10 0 -1 4194304 0",
			"SigPnd:\t0000000000004000\nShdPnd:\t0000000000000000\n", true},
		{"a name with spaces and parentheses", "12 (a (b) c) S 1 10 10 0 -1 4194304 0", none, true},
	} {
		fields := statFields([]byte(tc.stat))
		require.NotNil(t, fields, tc.name)
		require.Equal(t, "10", fields[2], "%s: the process group field", tc.name)
		require.Equal(t, tc.alive, alive(fields, []byte(tc.status)), tc.name)
	}
}
