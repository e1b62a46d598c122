//go:build !unix

package runner

import "os/exec"

// setProcessGroup does nothing where there are no process groups.
func setProcessGroup(*exec.Cmd) {}

// killGroup kills the program itself where there are no process groups;
// its children are not reached.
func killGroup(cmd *exec.Cmd, _ bool) { _ = cmd.Process.Kill() }
