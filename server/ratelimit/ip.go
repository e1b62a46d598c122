package ratelimit

import (
	"net"
	"net/netip"
)

// IPKey is the limiter key of a client at remoteAddr ("host:port", as in
// http.Request.RemoteAddr): the IPv4 address, or the /64 prefix of an IPv6
// one, since one host usually holds a whole /64 and could otherwise take a
// fresh bucket per address. A remoteAddr that does not parse is its own key.
//
// It is the peer of the TCP connection: behind a reverse proxy every
// client shares the proxy's key, so such a deployment should raise the
// per-IP limits or limit at the proxy.
func IPKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	addr = addr.Unmap()
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}
