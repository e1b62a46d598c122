package benchrun

import (
	"crypto/sha256"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// This process's CPU time as /proc reports it grows with work done, and
// its parent is the one the kernel names.
func TestProcStatReadsThisProcess(t *testing.T) {
	before, ppid, err := procStat(os.Getpid())
	require.NoError(t, err)
	require.Equal(t, os.Getppid(), ppid)
	sum := sha256.Sum256(nil)
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
		sum = sha256.Sum256(sum[:])
	}
	after, _, err := procStat(os.Getpid())
	require.NoError(t, err)
	require.GreaterOrEqual(t, after-before, 100*time.Millisecond, "200 ms of hashing")

	// The parent's children include this process: counted under it.
	s, err := readCPU(os.Getppid(), 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, s.postgres, after)
	_, _, err = procStat(1 << 30)
	require.Error(t, err)
}
