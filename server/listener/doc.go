// Package listener secures the control plane's listeners (docs/SPEC.md
// section 6, "Listeners"): TLS from a certificate and key file that are
// reloaded when they change (as cert-manager and certbot rotate them) or
// on demand (SIGHUP), or from an ACME CA; plain HTTP only on a loopback
// address unless the operator says otherwise. Every TLS listener takes TLS
// 1.2 at least, Go's default cipher suites, HTTP/2 and HTTP/1.1, and
// answers with Strict-Transport-Security.
package listener
