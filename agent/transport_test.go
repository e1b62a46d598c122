package agent

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTransportCheckURL(t *testing.T) {
	t.Parallel()
	for raw, ok := range map[string]bool{"http://127.0.0.1:8080": true, "http://localhost": true, "http://[::1]:1": true,
		"https://render.example.com": true, "http://render.example.com": false, "http://192.0.2.10:8080": false} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		err = Transport{}.CheckURL("--server", u)
		if ok {
			require.NoError(t, err, raw)
			continue
		}
		require.ErrorContains(t, err, "--insecure-plaintext", raw)
		require.NoError(t, Transport{InsecurePlaintext: true}.CheckURL("--server", u), raw)
	}
}

func TestTransportPinAndCAFile(t *testing.T) {
	t.Parallel()
	_, err := Transport{ServerPin: "sha256/tooshort"}.TLSConfig()
	require.ErrorContains(t, err, "--server-pin")
	_, err = Transport{ServerPin: "md5/" + "AAAA"}.TLSConfig()
	require.ErrorContains(t, err, "--server-pin")
	bad := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not a certificate"), 0o600))
	_, err = Transport{CAFile: bad}.TLSConfig()
	require.ErrorContains(t, err, "no PEM certificate")

	cert := &x509.Certificate{RawSubjectPublicKeyInfo: []byte("a key")}
	cfg, err := Transport{ServerPin: PinOf(cert)}.TLSConfig()
	require.NoError(t, err)
	require.NoError(t, cfg.VerifyConnection(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{RawSubjectPublicKeyInfo: []byte("leaf")}, cert}}}))
	err = cfg.VerifyConnection(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{RawSubjectPublicKeyInfo: []byte("leaf")}}}})
	require.ErrorIs(t, err, errPinMismatch)
	ce := certFailure("render.example.com:443", err)
	require.NotNil(t, ce)
	require.Contains(t, ce.Error(), "render.example.com:443")
	require.Contains(t, ce.Error(), "--server-pin")
	require.Nil(t, certFailure("h", errors.New("connection refused")))
	ce = certFailure("h:1", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}})
	require.NotNil(t, ce)
	require.Contains(t, ce.Error(), "--ca-file")
}
