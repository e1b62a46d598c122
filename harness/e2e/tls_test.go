package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent"
	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/harness/testca"
	"github.com/rendermac/rendermac/internal/localserver"
	"github.com/rendermac/rendermac/internal/pebbleprovider"
	"github.com/rendermac/rendermac/server/api"
)

// tlsFiles is a CA and a server certificate for 127.0.0.1 written where
// `rendermac server --tls-cert/--tls-key` and `rendermac agent --ca-file`
// read them.
type tlsFiles struct {
	ca                        *testca.CA
	caFile, certFile, keyFile string
	leaf                      *testca.Leaf
}

func newTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	ca, err := testca.New("e2e CA")
	require.NoError(t, err)
	caFile, err := ca.WriteCA(dir, "ca")
	require.NoError(t, err)
	leaf, err := ca.Issue("127.0.0.1", "localhost")
	require.NoError(t, err)
	f := tlsFiles{ca: ca, caFile: caFile, certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key"), leaf: leaf}
	require.NoError(t, leaf.Write(f.certFile, f.keyFile))
	return f
}

// startTLSServerProcess runs `rendermac server --tls-cert` with files,
// trusting 127.0.0.1 as a proxy; its clients trust the CA.
func startTLSServerProcess(t *testing.T, files tlsFiles, extra ...string) *serverProcess {
	t.Helper()
	return startServerProcessWith(t, serverProcessOptions{https: true, caFile: files.caFile, logLevel: "info",
		args: append([]string{"--artifacts", t.TempDir(), "--tls-cert", files.certFile, "--tls-key", files.keyFile,
			"--trusted-proxies", "127.0.0.1/32"}, extra...)})
}

// agentProcess is a `rendermac agent` process and its log.
type agentProcess struct {
	cmd    *exec.Cmd
	log    *logBuffer
	exited chan struct{}
}

// startAgentProcess runs the production binary as `rendermac agent args...`;
// it is stopped (SIGTERM, then SIGKILL) when the test ends or by stop.
func startAgentProcess(t *testing.T, name string, args ...string) *agentProcess {
	t.Helper()
	cmd := exec.Command(buildServerBinary(t), append([]string{"agent"}, args...)...)
	p := &agentProcess{cmd: cmd, log: newLogBuffer(t, name), exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(p.stop)
	return p
}

func (p *agentProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// waitLog waits until the log holds want at least n times.
func waitLog(t *testing.T, log *logBuffer, want string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for strings.Count(log.String(), want) < n {
		require.True(t, time.Now().Before(deadline), "no %d× %q within %v", n, want, within)
		time.Sleep(20 * time.Millisecond)
	}
}

// handshakeSerial makes one TLS handshake with addr trusting ca and returns
// the serial of the certificate presented, and the negotiated version.
func handshakeSerial(t *testing.T, addr string, ca *testca.CA) (string, uint16) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	require.NoError(t, err)
	defer conn.Close()
	cs := conn.ConnectionState()
	return cs.PeerCertificates[0].SerialNumber.String(), cs.Version
}

// A real `rendermac server --tls-cert` process and a real `rendermac agent
// --ca-file` process: the agent pairs over https, leases over wss, uploads
// to the https grant URL and commits; the certificate files are replaced
// (then SIGHUP) while its session is open, the next handshake presents the
// new certificate and the session stays; the same agent without --ca-file,
// and with a wrong --server-pin, refuses the server in one log line and
// backs off, and the server sees no WebSocket request from it at all.
func TestTLSServerAndAgentProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	files := newTLSFiles(t)
	p := startTLSServerProcess(t, files)
	addr := strings.TrimPrefix(p.base, "https://")
	serial, version := handshakeSerial(t, addr, files.ca)
	require.Equal(t, files.leaf.Cert.SerialNumber.String(), serial)
	require.Equal(t, uint16(tls.VersionTLS13), version)

	code, _, err := api.CreatePairingCode(ctx, p.pool, time.Time{}, 10*time.Minute)
	require.NoError(t, err)
	work, tokenFile := t.TempDir(), filepath.Join(t.TempDir(), "device.json")
	agentArgs := []string{"--server", p.base, "--token-file", tokenFile, "--services", runner.ServiceSynthetic, "--work", work}
	a := startAgentProcess(t, "rendermac agent", append(agentArgs, "--pair", code, "--ca-file", files.caFile, "--log-level", "debug")...)
	waitLog(t, a.log, "session open", 1, time.Minute)

	run := func(seed string) {
		t.Helper()
		created, err := p.buyer.Create(ctx, client.CreateRequest{Service: runner.ServiceSynthetic, Params: map[string]string{"seed": seed}})
		require.NoError(t, err)
		d := p.waitSucceeded(t, created.Job.ID)
		require.True(t, strings.HasPrefix(d.Output.DownloadURL, "https://"), "the grant URLs are the server's https ones: %s", d.Output.DownloadURL)
	}
	run("before rotation")

	// Rotation as cert-manager does it: new files renamed over the old.
	next, err := files.ca.Issue("127.0.0.1", "localhost")
	require.NoError(t, err)
	require.NoError(t, next.Write(files.certFile, files.keyFile))
	serial, _ = handshakeSerial(t, addr, files.ca)
	require.Equal(t, next.Cert.SerialNumber.String(), serial, "the next handshake presents the rotated certificate")
	// And as certbot's deploy hook does: files, then SIGHUP.
	third, err := files.ca.Issue("127.0.0.1", "localhost")
	require.NoError(t, err)
	require.NoError(t, third.Write(files.certFile, files.keyFile))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	waitLog(t, p.log, "why=\"reload requested\"", 1, 10*time.Second)
	serial, _ = handshakeSerial(t, addr, files.ca)
	require.Equal(t, third.Cert.SerialNumber.String(), serial)
	run("after rotation")
	require.Equal(t, 1, strings.Count(a.log.String(), "session open"), "the rotations did not drop the agent's session")
	a.stop()

	// Refusals: the device's credentials, but no CA, then a wrong pin.
	wsRequests := func() int { return strings.Count(p.log.String(), `route="GET /v1/provider/ws"`) }
	other, err := testca.New("another key")
	require.NoError(t, err)
	for _, tc := range []struct {
		name, flag string
		args       []string
	}{
		{"no --ca-file", "--ca-file", nil},
		{"wrong --server-pin", "--server-pin", []string{"--ca-file", files.caFile, "--server-pin", agent.PinOf(other.Cert)}},
	} {
		before, handshakesBefore := wsRequests(), strings.Count(p.log.String(), "TLS handshake error")
		r := startAgentProcess(t, "rendermac agent ("+tc.name+")", append(agentArgs, tc.args...)...)
		waitLog(t, r.log, "TLS: refused the certificate of "+addr, 3, time.Minute)
		r.stop()
		// Each refusal is one line of its own, naming the host and the
		// flag, and is followed by the session backoff (retry_in), not by
		// an immediate redial.
		var refusals []string
		for l := range strings.SplitSeq(r.log.String(), "\n") {
			if strings.Contains(l, "TLS: refused") {
				refusals = append(refusals, l)
				require.Contains(t, l, tc.flag, "the line names the flag that fixes it")
				// Any duration Go prints: the jittered first wait may be
				// under a millisecond (650.379µs was seen).
				require.Regexp(t, `retry_in=[0-9][0-9.hmµn]*s`, l, "the refusal is backed off")
			}
		}
		t.Logf("%s: %s", tc.name, refusals[0])
		require.Equal(t, before, wsRequests(), "%s: a WebSocket request reached the server", tc.name)
		require.Greater(t, strings.Count(p.log.String(), "TLS handshake error"), handshakesBefore, "the agent did reach the server")
	}
}

// Behind a trusted proxy the limiter keys on the forwarded client: one
// client's wrong keys get it alone a 429, and another client through the
// same proxy is served (`rendermac server --trusted-proxies`).
func TestTrustedProxyLimitsTheForwardedClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	files := newTLSFiles(t)
	metricsAddr, err := localserver.FreeAddr()
	require.NoError(t, err)
	p := startTLSServerProcess(t, files, "--metrics-listen", metricsAddr)
	// The metrics listener takes the same certificate.
	roots := x509.NewCertPool()
	roots.AddCert(files.ca.Cert)
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	t.Cleanup(h2.CloseIdleConnections)
	resp, err := h2.Get("https://" + metricsAddr + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "HTTP/2.0", resp.Proto, "HTTP/2 is offered on TLS listeners")
	get := func(key, xff string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/v1/jobs", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Forwarded-For", xff)
		resp, err := p.client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 20 {
		require.Equal(t, http.StatusUnauthorized, get("rmk_wrong", "203.0.113.9"))
	}
	require.Equal(t, http.StatusTooManyRequests, get("rmk_wrong", "203.0.113.9"))
	require.Equal(t, http.StatusTooManyRequests, get(p.apiKey, "203.0.113.9"), "the guessing client waits")
	require.Equal(t, http.StatusOK, get(p.apiKey, "198.51.100.8"), "another client behind the proxy is served")
	require.Contains(t, p.log.String(), `client=203.0.113.9 via=127.0.0.1:`, "the request log names the client and the proxy")
}

// A plain-HTTP listen on an address that is not loopback is refused at
// start, naming the address and the flags; with --insecure-plaintext the
// flags are accepted.
func TestPlaintextListenRefused(t *testing.T) {
	t.Parallel()
	bin := buildServerBinary(t)
	key := filepath.Join(t.TempDir(), "k")
	require.NoError(t, os.WriteFile(key, make([]byte, 32), 0o600))
	out, err := exec.Command(bin, "server", "--db", "postgres://unused", "--artifacts", t.TempDir(), "--signing-key-file", key,
		"--listen", "0.0.0.0:8080").CombinedOutput()
	require.Error(t, err)
	for _, want := range []string{"--listen 0.0.0.0:8080", "--tls-cert", "--acme-domain", "--insecure-plaintext"} {
		require.Contains(t, string(out), want)
	}
}

// `rendermac server --acme-domain` against Pebble, Let's Encrypt's test
// CA: the first handshake for the name obtains a certificate under
// Pebble's root (cached in --state-dir), which the agent's verification
// (agent.Transport with --ca-file Pebble's root) accepts; the shipped agent
// then runs a job over it.
func TestACMECertificateFromPebble(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	peb, err := pebbleprovider.Open(ctx, pebbleprovider.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = peb.Close() })
	dir, state := t.TempDir(), t.TempDir()
	rootFile := filepath.Join(dir, "pebble-root.pem")
	require.NoError(t, os.WriteFile(rootFile, peb.IssuerRootPEM, 0o644))
	const domain = "rendermac.test"
	p := startServerProcessWith(t, serverProcessOptions{https: true, host: domain, caFile: rootFile, logLevel: "info",
		args: []string{"--artifacts", t.TempDir(), "--acme-domain", domain, "--acme-email", "ops@rendermac.test",
			"--acme-ca", peb.DirectoryURL, "--acme-ca-root", peb.TLSRootFile, "--state-dir", state}})
	// The certificate is Pebble's, for the domain, and cached.
	conn, err := tls.Dial("tcp", p.addr, &tls.Config{ServerName: domain, InsecureSkipVerify: true}) //nolint:gosec // only read, never trusted
	require.NoError(t, err)
	leaf := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	require.Equal(t, []string{domain}, leaf.DNSNames)
	t.Logf("ACME certificate for %v issued by %q, serial %s", leaf.DNSNames, leaf.Issuer.String(), leaf.SerialNumber)
	cached, err := os.ReadDir(filepath.Join(state, "acme"))
	require.NoError(t, err)
	require.NotEmpty(t, cached, "the account and certificate are cached in --state-dir/acme")
	// Without Pebble's root the agent's verification refuses it.
	bare, err := agent.Transport{}.TLSConfig()
	require.NoError(t, err)
	bare.ServerName = domain
	_, err = tls.Dial("tcp", p.addr, bare)
	require.Error(t, err, "the system roots do not hold Pebble's")

	// Pairing as agent.Pair does it, through the client that dials the
	// name at loopback (this machine has no DNS for it).
	code, _, err := api.CreatePairingCode(ctx, p.pool, time.Time{}, 10*time.Minute)
	require.NoError(t, err)
	body, _ := json.Marshal(map[string]any{"code": code, "name": "acme-mac", "services": []string{runner.ServiceSynthetic}})
	resp, err := p.client.Post(p.base+"/v1/provider/pair", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	var creds struct {
		DeviceToken string `json:"device_token"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&creds))
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	a, err := agent.New(agent.Config{ServerURL: p.base, DeviceToken: creds.DeviceToken, Services: []string{runner.ServiceSynthetic},
		Slots: 1, WorkDir: t.TempDir(), Rand: mrand.New(mrand.NewPCG(1, 2)), Logger: debugLogger(newLogBuffer(t, "agent")),
		HTTPClient: p.client, BackoffBase: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond})
	require.NoError(t, err)
	actx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(actx) }()
	t.Cleanup(func() { stop(); <-done })
	created, err := p.buyer.Create(ctx, client.CreateRequest{Service: runner.ServiceSynthetic, Params: map[string]string{"seed": "acme"}})
	require.NoError(t, err)
	p.waitSucceeded(t, created.Job.ID)
}
