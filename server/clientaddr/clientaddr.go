package clientaddr

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Trusted is the set of proxies whose X-Forwarded-For is believed. The
// zero value trusts no one: every client is its TCP peer.
type Trusted struct{ prefixes []netip.Prefix }

// Parse reads a comma-separated list of CIDR prefixes or single addresses
// ("10.0.0.0/8,192.0.2.7"); "" is the empty set.
func Parse(list string) (Trusted, error) {
	var t Trusted
	for part := range strings.SplitSeq(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return Trusted{}, fmt.Errorf("trusted proxy %q: want a CIDR prefix (10.0.0.0/8) or an address", part)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		t.prefixes = append(t.prefixes, p.Masked())
	}
	return t, nil
}

// String lists the prefixes, comma-separated, as Parse reads them.
func (t Trusted) String() string {
	s := make([]string, len(t.prefixes))
	for i, p := range t.prefixes {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Empty reports whether no proxy is trusted.
func (t Trusted) Empty() bool { return len(t.prefixes) == 0 }

// trusts reports whether a is one of the trusted proxies.
func (t Trusted) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Client is the client address of a request whose TCP peer is peer and
// whose X-Forwarded-For header lines are xff: peer itself unless peer is
// trusted; then the X-Forwarded-For entries are walked from the right
// (each proxy appends the address it was connected from), skipping trusted
// proxies, and the first untrusted one is the client. A malformed entry
// stops the walk there: the entry before it (to its right) is the last one
// a trusted proxy wrote, so the answer is that trusted proxy's peer as far
// as it can be told, never an address the client chose.
func (t Trusted) Client(peer netip.Addr, xff []string) netip.Addr {
	client := peer.Unmap()
	if !t.trusts(client) {
		return client
	}
	entries := splitXFF(xff)
	for i := len(entries) - 1; i >= 0; i-- {
		a, err := parseEntry(entries[i])
		if err != nil {
			return client
		}
		client = a
		if !t.trusts(a) {
			return a
		}
	}
	return client
}

// splitXFF joins the header's lines (a proxy may add a line instead of
// appending to the last) into one list of entries, left to right.
func splitXFF(lines []string) []string {
	var out []string
	for _, line := range lines {
		for e := range strings.SplitSeq(line, ",") {
			out = append(out, strings.TrimSpace(e))
		}
	}
	return out
}

// parseEntry reads one X-Forwarded-For entry: an address, optionally with
// a port, IPv6 optionally bracketed.
func parseEntry(e string) (netip.Addr, error) {
	if ap, err := netip.ParseAddrPort(e); err == nil {
		return ap.Addr().Unmap(), nil
	}
	a, err := netip.ParseAddr(strings.Trim(e, "[]"))
	return a.Unmap(), err
}

type peerKey struct{}

// Handler sets r.RemoteAddr to the client's address (port 0 when it came
// from X-Forwarded-For, the peer's own port otherwise) before next runs,
// and keeps the TCP peer's address for Peer.
func (t Trusted) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil || t.Empty() {
			next.ServeHTTP(w, r)
			return
		}
		client := t.Client(ap.Addr(), r.Header.Values("X-Forwarded-For"))
		if client == ap.Addr().Unmap() {
			next.ServeHTTP(w, r)
			return
		}
		r2 := r.WithContext(context.WithValue(r.Context(), peerKey{}, r.RemoteAddr))
		r2.RemoteAddr = net.JoinHostPort(client.String(), "0")
		next.ServeHTTP(w, r2)
	})
}

// Peer is the TCP peer of a request Handler rewrote, or "" when the client
// is the peer itself (r.RemoteAddr).
func Peer(r *http.Request) string {
	p, _ := r.Context().Value(peerKey{}).(string)
	return p
}
