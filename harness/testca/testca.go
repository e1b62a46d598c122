// Package testca is the harness's certificate authority: a CA and the
// leaf certificates it signs, generated with crypto/x509 (ECDSA P-256) for
// the loopback addresses and names a test serves, and written as PEM
// files for `rendermac server --tls-cert/--tls-key` and `rendermac agent
// --ca-file`. Nothing here is fit for production; nothing in the product
// imports it.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a self-signed certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, for a --ca-file.
	PEM []byte
}

// Leaf is a certificate the CA signed, with its key.
type Leaf struct {
	Cert            *x509.Certificate
	CertPEM, KeyPEM []byte
	TLS             tls.Certificate
}

// serial draws a random 128-bit serial number.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

// New makes a CA named name, valid from an hour ago for a day.
func New(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name, Organization: []string{"rendermac test CA"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue signs a server certificate for hosts (IP addresses become IP SANs,
// anything else DNS names), valid from an hour ago for a day.
func (ca *CA) Issue(hosts ...string) (*Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	l := &Leaf{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}
	if l.TLS, err = tls.X509KeyPair(l.CertPEM, l.KeyPEM); err != nil {
		return nil, err
	}
	return l, nil
}

// WriteCA writes the CA certificate to dir/name.pem and returns its path.
func (ca *CA) WriteCA(dir, name string) (string, error) {
	path := filepath.Join(dir, name+".pem")
	return path, os.WriteFile(path, ca.PEM, 0o644)
}

// Write puts the leaf's certificate and key at certPath and keyPath
// (mode 0600), each by writing a temporary file beside it and renaming it
// over the old one, as cert-manager and certbot replace theirs: a reader
// sees the old file or the new one, never half of one.
func (l *Leaf) Write(certPath, keyPath string) error {
	for _, f := range []struct {
		path string
		data []byte
	}{{certPath, l.CertPEM}, {keyPath, l.KeyPEM}} {
		tmp := f.path + ".new"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			return fmt.Errorf("testca: %w", err)
		}
		if err := os.Rename(tmp, f.path); err != nil {
			return fmt.Errorf("testca: %w", err)
		}
	}
	return nil
}
