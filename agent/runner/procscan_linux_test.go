//go:build linux

package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// liveProcesses returns the pids of live processes (see alive) for which
// match(pid, stat fields after the command name, environ) holds.
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
		fields := statFields(stat)
		if fields == nil {
			continue
		}
		status, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if !alive(fields, status) {
			continue
		}
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if match(pid, fields, environ) {
			out = append(out, pid)
		}
	}
	return out
}

// statFields splits /proc/PID/stat after the command name, which may hold
// spaces and parentheses: fields then are state, ppid, pgrp, session,
// tty_nr, tpgid, flags, ... (proc(5)); nil if it is malformed.
func statFields(stat []byte) []string {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	if f := strings.Fields(string(stat[i+1:])); len(f) >= 7 {
		return f
	}
	return nil
}

// Process flags and signal masks of proc(5).
const (
	pfExiting   = 0x4          // PF_EXITING: the process is in exit(); it runs no code of its own again
	sigkillMask = 1 << (9 - 1) // SIGKILL's bit in SigPnd and ShdPnd
)

// alive says whether a process can still run code of its own. Not a
// zombie (dead, waiting for a parent to reap it, which PID 1 in a
// container may never do), not mid-exit (PF_EXITING: /proc still lists
// it in state R or D while the kernel tears it down, after it closed its
// files and before it becomes a zombie), and not holding a pending
// SIGKILL (sent, not yet acted on: the process is not scheduled yet, and
// SIGKILL cannot be caught, blocked or ignored, so it will not run again).
// kill(2) returns once the signal is queued, not once the process is gone:
// right after a group is killed, its members are usually in one of these
// states for a moment, longer on a loaded machine.
func alive(fields []string, status []byte) bool {
	if fields[0] == "Z" || fields[0] == "X" || fields[0] == "x" {
		return false
	}
	if flags, err := strconv.ParseUint(fields[6], 10, 64); err == nil && flags&pfExiting != 0 {
		return false
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "SigPnd" && key != "ShdPnd") {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(val), 16, 64); err == nil && mask&sigkillMask != 0 {
			return false
		}
	}
	return true
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
