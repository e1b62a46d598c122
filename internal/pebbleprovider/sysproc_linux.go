package pebbleprovider

import "syscall"

// sysProcAttr puts Pebble in its own process group and has the kernel kill
// it when we die.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
