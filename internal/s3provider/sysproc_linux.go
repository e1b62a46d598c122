package s3provider

import "syscall"

// sysProcAttr puts the server in its own process group (a Ctrl-C aimed at
// `go test` must not race Stop) and has the kernel kill it when we die.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
