package benchrun

import (
	"crypto/sha256"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// This process's CPU time as /proc reports it grows with work done, and
// its parent is the one the kernel names.
func TestProcStatReadsThisProcess(t *testing.T) {
	st, err := procStat(os.Getpid())
	require.NoError(t, err)
	require.Equal(t, os.Getppid(), st.ppid)
	before := st.cpu
	sum := sha256.Sum256(nil)
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
		sum = sha256.Sum256(sum[:])
	}
	st, err = procStat(os.Getpid())
	require.NoError(t, err)
	after := st.cpu
	require.GreaterOrEqual(t, after-before, 100*time.Millisecond, "200 ms of hashing")

	// The parent's children include this process: counted under it.
	s, err := readCPU(os.Getppid(), 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, s.postgres, after)
	_, err = procStat(1 << 30)
	require.Error(t, err)
}

// A child that has exited and been waited for still counts under its
// parent: a Postgres backend that exits within a phase is not lost.
func TestReadCPUCountsReapedChildren(t *testing.T) {
	before, err := readCPU(os.Getpid(), 0)
	require.NoError(t, err)
	cmd := exec.Command("sh", "-c", `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`)
	require.NoError(t, cmd.Run())
	child := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	require.Greater(t, child, 50*time.Millisecond, "the child's loop must cost measurable CPU")
	after, err := readCPU(os.Getpid(), 0)
	require.NoError(t, err)
	// This process stands in for the postmaster: its own time and its
	// reaped child's, each read in ticks of 10 ms.
	require.GreaterOrEqual(t, after.postgres-before.postgres, child-2*time.Second/userHZ)
}
