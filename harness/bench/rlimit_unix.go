//go:build unix

package bench

import (
	"fmt"
	"syscall"
)

// RaiseOpenFiles raises this process's soft limit on open files to at
// least need, within the hard limit, and returns the soft limit now in
// force. It fails, naming both numbers, when the hard limit is below need.
func RaiseOpenFiles(need uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur >= need {
		return lim.Cur, nil
	}
	if lim.Max < need {
		return lim.Cur, fmt.Errorf("it needs %d open files but the hard limit (RLIMIT_NOFILE) is %d; raise it "+
			"(ulimit -Hn as root, or LimitNOFILE=) or ask for fewer sessions", need, lim.Max)
	}
	lim.Cur = need
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("raise RLIMIT_NOFILE to %d (hard limit %d): %w", need, lim.Max, err)
	}
	return need, nil
}

// processCPU is this process's user plus system CPU time in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
