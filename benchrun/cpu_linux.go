package benchrun

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/<pid>/stat's CPU times: USER_HZ, which the
// kernel fixes at 100 for what it reports to user space on every Linux.
const userHZ = 100

// readCPU returns the CPU time (user + system) spent so far by the
// postmaster and every child of it (the Postgres backends), by this
// process, and by server when it is non-zero (the two-process server).
// /proc is read by hand: no library reads another process's times, and
// these are three fields of one line.
func readCPU(postmaster, server int) (cpuSample, error) {
	var s cpuSample
	self, _, err := procStat(os.Getpid())
	if err != nil {
		return s, err
	}
	s.self = self
	if server > 0 {
		if s.server, _, err = procStat(server); err != nil {
			return s, fmt.Errorf("server process %d: %w", server, err)
		}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return s, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cpu, ppid, err := procStat(pid)
		if err != nil {
			continue // exited meanwhile
		}
		if pid == postmaster || ppid == postmaster {
			s.postgres += cpu
		}
	}
	return s, nil
}

// parentOf is pid's parent.
func parentOf(pid int) (int, error) {
	_, ppid, err := procStat(pid)
	return ppid, err
}

// procStat reads pid's utime + stime and its parent from /proc/<pid>/stat.
func procStat(pid int) (time.Duration, int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name, in parentheses, may hold spaces: fields start after
	// the last ')'. Then: state ppid ... utime (14th field) stime (15th).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, 0, errors.New("unexpected /proc stat format")
	}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseInt(f[11], 10, 64)
	st, err3 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, fmt.Errorf("unexpected /proc stat format: %w", err)
	}
	return time.Duration(ut+st) * time.Second / userHZ, ppid, nil
}
