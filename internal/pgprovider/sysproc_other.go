//go:build unix && !linux

package pgprovider

import "syscall"

// sysProcAttr: no Pdeathsig outside Linux, so a postmaster can outlive a
// killed test binary; cleanStale then leaves its dir alone, and the
// backends and postmaster must be killed by hand. Own process group so a
// terminal Ctrl-C does not race Stop/Crash.
func sysProcAttr(as *runAs) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if as != nil {
		a.Credential = &syscall.Credential{Uid: uint32(as.uid), Gid: uint32(as.gid)}
	}
	return a
}

// killTree kills only the postmaster: without /proc its backends are not
// cheaply found, and they exit on their own once they notice it is gone
// (Start retries until they have).
func killTree(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }

func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) != syscall.ESRCH
}

func fastBaseDir() string { return "" }
