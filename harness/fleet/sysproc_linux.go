package fleet

import "syscall"

// childAttr has the kernel SIGKILL a child (server, agent) when the harness
// dies, however it dies: a fleet run killed with SIGKILL leaves no process
// behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// childrenDieWithUs says childAttr ties the children to the harness.
const childrenDieWithUs = true
