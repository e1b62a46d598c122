// Package loopback says whether a host names this machine only, for the
// rules that allow plain HTTP there and nowhere else (the server's
// listeners, the agent's server URL).
package loopback

import "net/netip"

// Host reports whether host (no port; IPv6 without brackets) is
// "localhost" or a loopback address. Any other name is not, even one that
// resolves to loopback: the answer must not depend on a resolver.
func Host(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
