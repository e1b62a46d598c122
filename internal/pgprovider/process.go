package pgprovider

import "syscall"

// BinDir finds the PostgreSQL server binaries the way Open does for a
// local cluster: PATH, then the distributions' directories, 15 first.
func BinDir() (string, error) { return findBinDir("") }

// ServerProcAttr is what a server-side child process (postgres, or a
// manager that starts it, such as Patroni) runs with: its own process
// group, killed when we die (Linux), and, when we are root, the
// unprivileged "postgres" account, since initdb and postgres refuse root.
// It also returns that account's uid and gid (-1 when we are not root),
// for the files the child must own.
func ServerProcAttr() (*syscall.SysProcAttr, int, int, error) {
	as, err := lookupRunAs()
	if err != nil {
		return nil, -1, -1, err
	}
	if as == nil {
		return sysProcAttr(nil), -1, -1, nil
	}
	return sysProcAttr(as), as.uid, as.gid, nil
}

// KillTree SIGKILLs a postmaster and its backends at once (see killTree):
// a crash, not a shutdown.
func KillTree(pid int) { killTree(pid) }

// ProcessAlive reports whether pid is a live (non-zombie) process.
func ProcessAlive(pid int) bool { return processAlive(pid) }
