//go:build !linux

package fleet

import "syscall"

// childAttr: no parent-death signal off Linux. A run that ends or is
// interrupted (SIGINT, SIGTERM) stops its children itself; the children of
// one killed outright are killed by the next run's cleanStale.
func childAttr() *syscall.SysProcAttr { return nil }

// childrenDieWithUs says childAttr ties the children to the harness.
const childrenDieWithUs = false
