package listener

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// selfSigned writes a fresh self-signed certificate for 127.0.0.1 and its
// key to certFile and keyFile, and returns its serial.
func selfSigned(t *testing.T, certFile, keyFile string) *big.Int {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "127.0.0.1"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(certFile+".new", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile+".new", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	require.NoError(t, os.Rename(certFile+".new", certFile))
	require.NoError(t, os.Rename(keyFile+".new", keyFile))
	return serial
}

func served(t *testing.T, c *Certs) *big.Int {
	t.Helper()
	cert, err := c.Config().GetCertificate(&tls.ClientHelloInfo{})
	require.NoError(t, err)
	return cert.Leaf.SerialNumber
}

// The pair is read again when the files change, and on Reload; a pair
// that does not load (a certificate with another's key, as between the two
// writes of a rotation) leaves the previous one in service.
func TestKeyPairReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first := selfSigned(t, certFile, keyFile)
	c, err := New(Options{CertFile: certFile, KeyFile: keyFile}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, first, served(t, c))
	require.Equal(t, uint16(tls.VersionTLS12), c.Config().MinVersion)

	second := selfSigned(t, certFile, keyFile)
	require.Equal(t, second, served(t, c), "the change is seen at the next handshake")

	// Half a rotation: a new certificate, the old key.
	oldKey, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	selfSigned(t, certFile, filepath.Join(dir, "other.key"))
	require.Equal(t, second, served(t, c), "a pair that does not load leaves the previous certificate")
	require.Error(t, c.Reload())
	require.NoError(t, os.WriteFile(keyFile, oldKey, 0o600))

	third := selfSigned(t, certFile, keyFile)
	require.NoError(t, c.Reload())
	require.Equal(t, third, served(t, c))
}

func TestOptionsCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{CertFile: "c"}, "go together"},
		{Options{CertFile: "c", KeyFile: "k", ACME: ACME{Domains: []string{"a.example"}, CacheDir: "/s"}}, "give one"},
		{Options{ACME: ACME{Domains: []string{"a.example"}}}, "--state-dir"},
		{Options{ACME: ACME{Email: "x@example.com"}}, "only with --acme-domain"},
	} {
		require.ErrorContains(t, tc.o.Check(), tc.want)
	}
	c, err := New(Options{}, nil)
	require.NoError(t, err)
	require.Nil(t, c, "no certificate: plain HTTP")
	_, err = New(Options{CertFile: "/nonexistent/c", KeyFile: "/nonexistent/k"}, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "/nonexistent/c")
}

func TestCheckPlaintext(t *testing.T) {
	t.Parallel()
	for addr, loop := range map[string]bool{"127.0.0.1:80": true, "127.9.9.9:80": true, "[::1]:80": true, "localhost:80": true,
		"0.0.0.0:80": false, ":80": false, "[::]:80": false, "10.0.0.1:80": false, "render.example.com:80": false, "garbage": false} {
		require.Equal(t, loop, Loopback(addr), addr)
		err := CheckPlaintext("--listen", addr, false)
		if loop {
			require.NoError(t, err, addr)
		} else {
			require.ErrorContains(t, err, "--listen "+addr, addr)
			require.NoError(t, CheckPlaintext("--listen", addr, true), addr)
		}
	}
}
