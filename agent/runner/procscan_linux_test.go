//go:build linux

package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// liveProcesses returns the pids of processes that are not zombies and for
// which match(pid, stat fields after the command name, environ) holds. A
// zombie is dead: it only waits for a parent to reap it, and PID 1 in a
// container may never do that.
func liveProcesses(match func(pid int, fields []string, environ []byte) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// The command name may hold spaces and parentheses: split after
		// the last ')'. Fields then are: state, ppid, pgrp, ...
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 3 || fields[0] == "Z" || fields[0] == "X" {
			continue
		}
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if match(pid, fields, environ) {
			out = append(out, pid)
		}
	}
	return out
}

// groupMembers are the live processes of process group pgid.
func groupMembers(pgid int) []int {
	want := strconv.Itoa(pgid)
	return liveProcesses(func(_ int, fields []string, _ []byte) bool { return fields[2] == want })
}

// processesWithEnv are the live processes whose environment holds kv. The
// command runner's environment is inherited by everything it starts, even a
// process that left its group (setsid), so this finds any orphan.
func processesWithEnv(kv string) []int {
	needle := []byte("\x00" + kv + "\x00")
	return liveProcesses(func(_ int, _ []string, environ []byte) bool {
		return bytes.Contains(append([]byte{0}, environ...), needle)
	})
}
