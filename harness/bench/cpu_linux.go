package bench

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
// postmaster and every child of it (the Postgres backends), those it has
// reaped included (so a backend that exits within a phase still counts), by
// this process, and by server when it is non-zero (the two-process server).
// /proc is read by hand: no library reads another process's times, and
// these are a few fields of one line. A backend reaped between the
// postmaster's line and its own is missed: milliseconds at most.
func readCPU(postmaster, server int) (cpuSample, error) {
	var s cpuSample
	self, err := procStat(os.Getpid())
	if err != nil {
		return s, err
	}
	s.self = self.cpu
	if server > 0 {
		srv, err := procStat(server)
		if err != nil {
			return s, fmt.Errorf("server process %d: %w", server, err)
		}
		s.server = srv.cpu
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
		st, err := procStat(pid)
		if err != nil {
			continue // exited meanwhile
		}
		switch {
		case pid == postmaster:
			s.postgres += st.cpu + st.reaped
		case st.ppid == postmaster:
			s.postgres += st.cpu
		}
	}
	return s, nil
}

// parentOf is pid's parent.
func parentOf(pid int) (int, error) {
	st, err := procStat(pid)
	return st.ppid, err
}

// procTimes is one process's line of /proc/<pid>/stat.
type procTimes struct {
	cpu    time.Duration // utime + stime
	reaped time.Duration // cutime + cstime: its children it has waited for
	ppid   int
}

// procStat reads pid's /proc/<pid>/stat.
func procStat(pid int) (procTimes, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procTimes{}, err
	}
	// The command name, in parentheses, may hold spaces: fields start after
	// the last ')'. Then: state ppid ... utime (14th field) stime cutime
	// cstime (17th).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procTimes{}, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return procTimes{}, errors.New("unexpected /proc stat format")
	}
	ppid, err := strconv.Atoi(f[1])
	ticks := make([]int64, 4)
	for k := range ticks {
		var e error
		ticks[k], e = strconv.ParseInt(f[11+k], 10, 64)
		err = errors.Join(err, e)
	}
	if err != nil {
		return procTimes{}, fmt.Errorf("unexpected /proc stat format: %w", err)
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / userHZ }
	return procTimes{cpu: tick(ticks[0] + ticks[1]), reaped: tick(ticks[2] + ticks[3]), ppid: ppid}, nil
}
