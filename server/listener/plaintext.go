package listener

import (
	"fmt"
	"net"

	"github.com/rendermac/rendermac/internal/loopback"
)

// CheckPlaintext refuses to serve plain HTTP on addr unless addr is a
// loopback address or insecure (the operator's --insecure-plaintext) is
// set. flag names the listen flag in the refusal. A host name other than
// localhost, and an empty host (every interface), are not loopback.
func CheckPlaintext(flag, addr string, insecure bool) error {
	if insecure || Loopback(addr) {
		return nil
	}
	return fmt.Errorf("%s %s: refusing to serve plain HTTP on an address that is not loopback, where tokens and keys would cross "+
		"the network in clear; give the server a certificate (--tls-cert and --tls-key, or --acme-domain), listen on 127.0.0.1, "+
		"or pass --insecure-plaintext when a TLS-terminating proxy in front is the only peer", flag, addr)
}

// Loopback reports whether the listen address addr ("host:port") binds
// only loopback interfaces.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && loopback.Host(host)
}
