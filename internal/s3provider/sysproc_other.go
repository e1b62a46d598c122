//go:build !linux

package s3provider

import "syscall"

// sysProcAttr: no parent-death signal off Linux; Close stops the server.
func sysProcAttr() *syscall.SysProcAttr { return nil }
