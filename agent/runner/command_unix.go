//go:build unix

package runner

import (
	"os/exec"
	"syscall"
)

// setProcessGroup makes the command the leader of a new process group, so
// that it and everything it starts (a browser, an ffmpeg) can be signalled
// as one: kill(-pgid).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup signals the command's whole process group: SIGKILL when hard,
// else SIGTERM so the program can stop its children and clean up. A group
// with no process left (ESRCH) is not an error: there is nothing to stop.
func killGroup(cmd *exec.Cmd, hard bool) {
	sig := syscall.SIGTERM
	if hard {
		sig = syscall.SIGKILL
	}
	// The group id is the leader's pid (Setpgid with Pgid 0). The kernel
	// does not reuse a pid while a group of that id has members; once the
	// group is empty and the leader reaped, a reused pid would have to lead
	// a new group of its own within this call's window to be reached.
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
