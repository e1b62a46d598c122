package bench

import (
	"crypto/sha256"
	"os"
	"os/exec"
	"syscall"
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
	// Hash until the kernel's own account (getrusage) says this process
	// used 200 ms of CPU: a wall-clock loop on a loaded machine may get far
	// less CPU than its duration.
	rusage0 := selfCPU(t)
	sum := sha256.Sum256(nil)
	for start := time.Now(); selfCPU(t)-rusage0 < 200*time.Millisecond; {
		for range 1000 {
			sum = sha256.Sum256(sum[:])
		}
		require.Less(t, time.Since(start), time.Minute, "200 ms of CPU never came")
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

// selfCPU is this process's user+system CPU by getrusage, an account
// independent of /proc/PID/stat, which procStat reads.
func selfCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
