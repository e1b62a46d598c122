// Package pebbleprovider hands out a real ACME CA to tests: Pebble, Let's
// Encrypt's own test server (github.com/letsencrypt/pebble), started as a
// process on loopback ports, as internal/s3provider starts versitygw. Its
// validation authority is told to accept every challenge
// (PEBBLE_VA_ALWAYS_VALID=1): the names a test asks for (rendermac.test)
// resolve nowhere, and what is under test is the ACME client and the
// certificate it serves, not Pebble's validation. Its nonce rejection is
// off, so a test's one order does not depend on a retry.
//
// Open finds the binary in Options.Bin, $PEBBLE, PATH, $GOBIN and
// $(go env GOPATH)/bin; without one it fails with ErrNoPebble and the
// command that installs it (InstallCommand, which .ci/setup runs). Tests fail
// rather than skip.
package pebbleprovider

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rendermac/rendermac/internal/localserver"
)

// InstallCommand installs the binary Open looks for.
const InstallCommand = "go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3"

// ErrNoPebble is wrapped by Open's error when no pebble binary is found.
var ErrNoPebble = errors.New("pebbleprovider: no pebble binary")

// Options tune Open; the zero value is what tests want.
type Options struct {
	// Bin forces the pebble binary.
	Bin string
}

// Server is one Pebble process.
type Server struct {
	// DirectoryURL is the ACME directory (https, served with the
	// certificate of TLSRootFile).
	DirectoryURL string
	// TLSRootFile is a PEM file of the certificate Pebble's own HTTPS
	// presents (self-signed), for the ACME client's --acme-ca-root.
	TLSRootFile string
	// IssuerRootPEM is the root Pebble signs certificates under (drawn
	// afresh at each start), for the clients of the certified server.
	IssuerRootPEM []byte

	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Open starts Pebble on free loopback ports in a fresh directory and waits
// until its directory and root answer.
func Open(ctx context.Context, o Options) (*Server, error) {
	bin, err := localserver.FindBin(localserver.Binary{Name: "pebble", Env: "PEBBLE", Install: InstallCommand, NotFound: ErrNoPebble}, o.Bin)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rendermac-pebble-")
	if err != nil {
		return nil, fmt.Errorf("pebbleprovider: %w", err)
	}
	s := &Server{dir: dir, exited: make(chan struct{})}
	if err := s.start(ctx, bin); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context, bin string) error {
	certPEM, keyPEM, err := selfSigned()
	if err != nil {
		return err
	}
	s.TLSRootFile = filepath.Join(s.dir, "pebble-tls.pem")
	keyFile := filepath.Join(s.dir, "pebble-tls.key")
	if err := os.WriteFile(s.TLSRootFile, certPEM, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	var addrs [4]string
	for i := range addrs {
		if addrs[i], err = localserver.FreeAddr(); err != nil {
			return err
		}
	}
	port := func(a string) int { _, p, _ := net.SplitHostPort(a); var n int; fmt.Sscan(p, &n); return n }
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress": addrs[0], "managementListenAddress": addrs[1], "certificate": s.TLSRootFile, "privateKey": keyFile,
		"httpPort": port(addrs[2]), "tlsPort": port(addrs[3]), "ocspResponderURL": "", "externalAccountBindingRequired": false,
	}}
	data, _ := json.Marshal(cfg)
	cfgFile := filepath.Join(s.dir, "pebble-config.json")
	if err := os.WriteFile(cfgFile, data, 0o600); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(s.dir, "pebble.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	s.cmd = exec.Command(bin, "-config", cfgFile)
	s.cmd.Env = append(os.Environ(), "PEBBLE_VA_ALWAYS_VALID=1", "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0")
	s.cmd.Stdout, s.cmd.Stderr, s.cmd.SysProcAttr = logf, logf, sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("pebbleprovider: start %s: %w", bin, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	s.DirectoryURL = "https://" + addrs[0] + "/dir"
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s.IssuerRootPEM, err = get(ctx, c, "https://"+addrs[1]+"/roots/0"); err == nil {
			if _, err = get(ctx, c, s.DirectoryURL); err == nil {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("pebbleprovider: pebble exited; its log: %s", s.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pebbleprovider: pebble did not answer within 30s (%v); its log: %s", err, s.logTail())
		}
	}
}

func get(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return b, err
}

func (s *Server) logTail() string { return localserver.LogTail(filepath.Join(s.dir, "pebble.log")) }

// Close stops Pebble and removes its directory.
func (s *Server) Close() error {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	return os.RemoveAll(s.dir)
}

// selfSigned makes the certificate Pebble's HTTPS serves, for 127.0.0.1.
func selfSigned() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "pebble test server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames: []string{"localhost"}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true,
		BasicConstraintsValid: true, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}
