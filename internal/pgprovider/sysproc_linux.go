package pgprovider

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr puts the child in its own process group (a Ctrl-C aimed at
// `go test` must not race our own Stop/Crash) and makes the kernel SIGKILL
// it when we die. Pdeathsig fires when the creating *thread* exits; Go
// only retires threads whose goroutine exited while locked with
// LockOSThread, and such a thread never runs our (unlocked) goroutines.
func sysProcAttr(as *runAs) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if as != nil {
		a.Credential = &syscall.Credential{Uid: uint32(as.uid), Gid: uint32(as.gid)}
	}
	return a
}

// killTree SIGKILLs the postmaster and its backends. Backends call setsid,
// so a process-group kill would miss them; they would eventually notice
// the dead postmaster, but until then they hold the shared memory segment
// and a restart fails. SIGSTOP first so no child is forked while we look.
func killTree(pid int) {
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	for _, ch := range childrenOf(pid) {
		_ = syscall.Kill(ch, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// Format: pid (comm) state ppid ...; comm may contain spaces.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b)[i+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		if ch, err := strconv.Atoi(filepath.Base(filepath.Dir(st))); err == nil {
			out = append(out, ch)
		}
	}
	return out
}

// processAlive treats zombies as dead: a killed postmaster whose reaper
// (init in a container) is slow must not pin its temp dir forever.
func processAlive(pid int) bool {
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && strings.HasPrefix(string(b)[i+1:], " Z") {
			return false
		}
	}
	return syscall.Kill(pid, 0) != syscall.ESRCH
}

// fastBaseDir returns /dev/shm when it is a tmpfs with room to spare.
// Without fsync, durability across OS crashes is gone anyway, and on slow
// or busy disks tmpfs makes CREATE DATABASE ... TEMPLATE ~20x faster
// (measured: 300ms -> 16ms). Small container /dev/shm (64MB by default)
// is skipped: running out of space there would fail tests confusingly.
func fastBaseDir() string {
	const tmpfsMagic = 0x01021994
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err != nil || st.Type != tmpfsMagic {
		return ""
	}
	if st.Bavail*uint64(st.Bsize) < 2<<30 {
		return ""
	}
	return "/dev/shm"
}
