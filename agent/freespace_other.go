//go:build !unix

package agent

// freeBytes cannot tell on this platform: the free-space check is off.
func freeBytes(string) (int64, bool) { return 0, false }
