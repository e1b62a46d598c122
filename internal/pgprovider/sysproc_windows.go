package pgprovider

import (
	"os"
	"syscall"
)

// Windows is not a supported host for the local cluster (no root/uid
// handling, no SIGINT); these stubs only keep the package compiling.
func sysProcAttr(*runAs) *syscall.SysProcAttr { return nil }

func killTree(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

func processAlive(int) bool { return true }

func fastBaseDir() string { return "" }
