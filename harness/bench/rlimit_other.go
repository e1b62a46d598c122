//go:build !unix

package bench

// RaiseOpenFiles does nothing where there is no RLIMIT_NOFILE; the dials
// fail on their own if the system runs out of descriptors.
func RaiseOpenFiles(need uint64) (uint64, error) { return 0, nil }

// processCPU is not measured here.
func processCPU() float64 { return 0 }
