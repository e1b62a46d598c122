//go:build faultpoints && unix

package faultpoint

import (
	"os"
	"syscall"
)

// killSelf sends SIGKILL to this process; it does not return.
func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is asynchronous: never run on past the point
}
