package e2e

import "syscall"

// childSysProcAttr kills the child agent if this test process dies first,
// so an interrupted run leaves no agent behind.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
