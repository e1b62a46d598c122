//go:build !linux

package e2e

import "syscall"

// childSysProcAttr: only Linux has a parent-death signal; elsewhere the
// test's cleanup kills the child.
func childSysProcAttr() *syscall.SysProcAttr { return nil }
