package agent

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/rendermac/rendermac/internal/certpool"
	"github.com/rendermac/rendermac/internal/loopback"
)

// Transport is how the agent reaches the control plane (docs/SPEC.md
// section 5, "Transport"): over https/wss it verifies the server's
// certificate against the system roots plus CAFile and, with ServerPin,
// also requires the pinned public key in the verified chain; plain
// http/ws is refused to anything but loopback unless InsecurePlaintext.
// The checks run inside the TLS handshake, before any request is written,
// so the device token never reaches a server that failed them.
type Transport struct {
	// CAFile is a PEM bundle trusted besides the system roots ("": none).
	CAFile string
	// ServerPin is "sha256/" and the base64 SHA-256 of a certificate's
	// SubjectPublicKeyInfo ("": no pin), as `openssl x509 -pubkey | openssl
	// pkey -pubin -outform der | openssl dgst -sha256 -binary | base64` prints.
	ServerPin string
	// InsecurePlaintext allows http:// to hosts that are not loopback.
	InsecurePlaintext bool
}

// pinPrefix starts a pin: the hash named, as in HPKP's pin-sha256.
const pinPrefix = "sha256/"

// parsePin decodes a ServerPin ("": nil).
func parsePin(pin string) ([]byte, error) {
	if pin == "" {
		return nil, nil
	}
	b64, ok := strings.CutPrefix(pin, pinPrefix)
	raw, err := base64.StdEncoding.DecodeString(b64)
	if !ok || err != nil || len(raw) != sha256.Size {
		return nil, fmt.Errorf("--server-pin %q: want sha256/ and the base64 SHA-256 of the certificate's public key (44 characters)", pin)
	}
	return raw, nil
}

// PinOf is the ServerPin of cert's public key.
func PinOf(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return pinPrefix + base64.StdEncoding.EncodeToString(sum[:])
}

// errPinMismatch is the handshake's refusal of a chain without the pin.
var errPinMismatch = errors.New("no certificate of the verified chain has the pinned public key")

// TLSConfig is the client side of every connection to the control plane:
// TLS 1.2 at least, the system roots plus CAFile, and the pin checked on the
// chains the standard verification built (it never replaces it).
func (t Transport) TLSConfig() (*tls.Config, error) {
	roots, err := certpool.SystemPlus(t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	pin, err := parsePin(t.ServerPin)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if pin != nil {
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			for _, chain := range cs.VerifiedChains {
				for _, c := range chain {
					if sum := sha256.Sum256(c.RawSubjectPublicKeyInfo); bytes.Equal(sum[:], pin) {
						return nil
					}
				}
			}
			return errPinMismatch
		}
	}
	return cfg, nil
}

// Client is the HTTP client of the session, the pairing and artifact
// transfers: HTTP/1.1 (the WebSocket upgrade needs it) over TLSConfig.
func (t Transport) Client() (*http.Client, error) {
	cfg, err := t.TLSConfig()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	tr.ForceAttemptHTTP2 = false
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	return &http.Client{Transport: tr}, nil
}

// CheckURL refuses a plain http:// server URL whose host is not loopback,
// unless InsecurePlaintext: the device token would cross the network in
// clear.
func (t Transport) CheckURL(flag string, u *url.URL) error {
	if u.Scheme != "http" || t.InsecurePlaintext || loopback.Host(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("%s %s: refusing plain http to %s, which is not loopback: the device token would cross the network in clear; "+
		"use https://, or pass --insecure-plaintext on a network you trust", flag, u.Redacted(), u.Hostname())
}

// CertError is a failed verification of the server's certificate, said in
// one line: the host, what failed, and the flag that fixes it.
type CertError struct {
	Host, What, Fix string
	Err             error
}

func (e *CertError) Error() string {
	return fmt.Sprintf("TLS: refused the certificate of %s: %s; %s", e.Host, e.What, e.Fix)
}

func (e *CertError) Unwrap() error { return e.Err }

// certFailure classifies err from a dial of host as a certificate failure,
// or returns nil when it is something else.
func certFailure(host string, err error) *CertError {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, errPinMismatch):
		return &CertError{Host: host, What: "its public key is not the one --server-pin names", Err: err,
			Fix: "fix --server-pin (the server's key changed?) or drop it"}
	case errors.As(err, &unknown):
		issuer := "an unknown issuer"
		if unknown.Cert != nil {
			issuer = fmt.Sprintf("%q", unknown.Cert.Issuer.String())
		}
		return &CertError{Host: host, What: "it is signed by " + issuer + ", which is not among the trusted roots", Err: err,
			Fix: "pass that CA's certificate with --ca-file"}
	case errors.As(err, &hostname):
		return &CertError{Host: host, What: "it is not valid for " + hostname.Host, Err: err,
			Fix: "use the host name the certificate names in --server"}
	case errors.As(err, &invalid):
		return &CertError{Host: host, What: invalid.Error(), Err: err,
			Fix: "renew the server's certificate (its --tls-cert), or pass the right CA with --ca-file"}
	}
	return nil
}
