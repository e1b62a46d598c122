// Package certpool builds the root pools the agent trusts the control
// plane with (--ca-file) and the server trusts a private ACME CA with
// (--acme-ca-root): the system's roots plus a PEM bundle of the operator's.
package certpool

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// SystemPlus returns the system roots with every certificate of the PEM
// file path added ("" path: the system roots alone, nil when the system
// has none, which crypto/tls then reads as "the system roots"). A file that
// holds no certificate is an error naming it, so a wrong path or a key
// file given by mistake is said rather than ignored.
func SystemPlus(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("CA file " + path + ": no PEM certificate in it (want the CA's certificate, -----BEGIN CERTIFICATE-----)")
	}
	return pool, nil
}
