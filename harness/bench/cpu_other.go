//go:build !linux

package bench

import "errors"

var errNoProc = errors.New("CPU per job is read from /proc, which only Linux has")

func readCPU(postmaster, server int) (cpuSample, error) { return cpuSample{}, errNoProc }

func parentOf(pid int) (int, error) { return 0, errNoProc }
