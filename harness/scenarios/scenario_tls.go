package scenarios

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rendermac/rendermac/agent"
	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/harness/testca"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/controlplane"
	"github.com/rendermac/rendermac/server/listener"
)

// The transport as an operator exposes it (SPEC sections 5 and 6): a
// stack's handler served through package listener's TLS (the code
// `rendermac server --tls-cert` runs) with certificates of a CA the script
// makes; handshakes by old clients, certificate files rotated under open
// connections, the shipped agent dialling it with and without the CA and
// a pin, and plain-HTTP listens and server URLs the product must refuse.

func init() {
	for name, h := range map[string]scCommand{
		"tls-ca": cmdTLSCA, "tls-cert": cmdTLSCert, "tls-serve": cmdTLSServe, "tls-handshake": cmdTLSHandshake,
		"tls-get": cmdTLSGet, "tls-rotate": cmdTLSRotate, "tls-agent": cmdTLSAgent,
		"plaintext-listen": cmdPlaintextListen, "agent-url": cmdAgentURL, "forwarded": cmdForwarded,
	} {
		scCommands[name] = h
	}
}

// scTLS is the per-run state of the TLS commands.
type scTLS struct {
	dir     string
	cas     map[string]*testca.CA
	caFiles map[string]string
	leaves  map[string]*testca.Leaf
	servers map[string]*scTLSServer
	agents  int
}

// scTLSServer is a stack's handler behind package listener's TLS, with a
// record of what reached it: connections accepted, and every request that
// got through the handshake (path, and the bearer secret it carried).
type scTLSServer struct {
	srv               *http.Server
	addr              string
	certFile, keyFile string
	done              chan error

	mu       sync.Mutex
	accepted int
	requests []scTLSRequest
}

type scTLSRequest struct{ path, bearer string }

func (s *scTLSServer) counts() (accepted int, reqs []scTLSRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted, append([]scTLSRequest(nil), s.requests...)
}

type scCountingListener struct {
	net.Listener
	s *scTLSServer
}

func (l scCountingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.s.mu.Lock()
		l.s.accepted++
		l.s.mu.Unlock()
	}
	return c, err
}

func (r *scRun) tlsState() (*scTLS, error) {
	if r.tls == nil {
		dir := filepath.Join(r.dir, "tls")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		r.tls = &scTLS{dir: dir, cas: map[string]*testca.CA{}, caFiles: map[string]string{}, leaves: map[string]*testca.Leaf{},
			servers: map[string]*scTLSServer{}}
	}
	return r.tls, nil
}

func (t *scTLS) close() {
	if t == nil {
		return
	}
	for _, s := range t.servers {
		_ = s.srv.Close()
		<-s.done
	}
}

// cmdTLSCA makes a certificate authority and writes its certificate.
// Example: tls-ca ca1
func cmdTLSCA(r *scRun, st scStep) error {
	t, err := r.tlsState()
	if err != nil {
		return err
	}
	name := arg(st, 0)
	if name == "" {
		return errors.New("want: tls-ca NAME")
	}
	ca, err := testca.New("scenario " + name)
	if err != nil {
		return err
	}
	t.cas[name] = ca
	t.caFiles[name], err = ca.WriteCA(t.dir, name)
	return err
}

// cmdTLSCert has a CA sign a server certificate for 127.0.0.1 and localhost.
// Example: tls-cert c1 ca=ca1
func cmdTLSCert(r *scRun, st scStep) error {
	t, err := r.tlsState()
	if err != nil {
		return err
	}
	ca := t.cas[st.opt("ca", "")]
	if arg(st, 0) == "" || ca == nil {
		return errors.New("want: tls-cert NAME ca=CA (after tls-ca CA)")
	}
	leaf, err := ca.Issue("127.0.0.1", "localhost")
	if err != nil {
		return err
	}
	t.leaves[arg(st, 0)] = leaf
	return nil
}

// cmdTLSServe serves a stack's handler on a loopback port through
// listener.New and listener.Serve, the certificate files being CERT's.
// Example: tls-serve s1 cert=c1 gateway=gw1
func cmdTLSServe(r *scRun, st scStep) error {
	t, err := r.tlsState()
	if err != nil {
		return err
	}
	name, leaf := arg(st, 0), t.leaves[st.opt("cert", "")]
	if name == "" || leaf == nil || t.servers[name] != nil {
		return errors.New("want: tls-serve NEW-NAME cert=CERT [gateway=G] (after tls-cert CERT)")
	}
	gw, err := r.stack(st.opt("gateway", "gw1"))
	if err != nil {
		return err
	}
	s := &scTLSServer{certFile: filepath.Join(t.dir, name+".crt"), keyFile: filepath.Join(t.dir, name+".key"), done: make(chan error, 1)}
	if err := leaf.Write(s.certFile, s.keyFile); err != nil {
		return err
	}
	certs, err := listener.New(listener.Options{CertFile: s.certFile, KeyFile: s.keyFile}, slog.New(&scLogHandler{r: r, gateway: name}))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.addr = ln.Addr().String()
	inner := gw.srv.Config.Handler
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, scTLSRequest{path: req.URL.Path, bearer: req.Header.Get("Authorization")})
		s.mu.Unlock()
		inner.ServeHTTP(w, req)
	})}
	go func() { s.done <- listener.Serve(s.srv, scCountingListener{Listener: ln, s: s}, certs) }()
	t.servers[name] = s
	r.tl.add(laneGateway, fmt.Sprintf("%s serves %s over TLS at %s (certificate %s)", name, gw.name, s.addr, st.opt("cert", "")))
	return nil
}

func (t *scTLS) server(name string) (*scTLSServer, error) {
	if s := t.servers[name]; s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("no TLS server %s (tls-serve)", name)
}

// clientConfig trusts CA ca ("": nothing but the system roots).
func (t *scTLS) clientConfig(ca string) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: "127.0.0.1"}
	if ca != "" {
		c := t.cas[ca]
		if c == nil {
			return nil, fmt.Errorf("no CA %s", ca)
		}
		cfg.RootCAs = x509.NewCertPool()
		cfg.RootCAs.AddCert(c.Cert)
	}
	return cfg, nil
}

// tlsClientOf is the state, the server the step's first word names, and a
// client configuration trusting its ca= option.
func (r *scRun) tlsClientOf(st scStep) (*scTLS, *scTLSServer, *tls.Config, error) {
	t, err := r.tlsState()
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := t.server(arg(st, 0))
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := t.clientConfig(st.opt("ca", ""))
	return t, s, cfg, err
}

// tlsVersions maps the script's versions to crypto/tls's.
var tlsVersions = map[string]uint16{"1.0": tls.VersionTLS10, "1.1": tls.VersionTLS11, "1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13}

// cmdTLSHandshake makes one TLS handshake with server NAME (at most
// version max, offering h2 and http/1.1) and checks it is refused, or that
// it succeeds with the certificate CERT and the protocol ALPN.
// Example: tls-handshake s1 max=1.1 ca=ca1 -> refused
// Example: tls-handshake s1 ca=ca1 -> ok cert=c1 alpn=h2
func cmdTLSHandshake(r *scRun, st scStep) error {
	t, s, cfg, err := r.tlsClientOf(st)
	if err != nil {
		return err
	}
	cfg.NextProtos = []string{"h2", "http/1.1"}
	if v := st.opt("max", ""); v != "" {
		if cfg.MaxVersion = tlsVersions[v]; cfg.MaxVersion == 0 {
			return fmt.Errorf("max=%s: want 1.0, 1.1, 1.2 or 1.3", v)
		}
		cfg.MinVersion = tls.VersionTLS10
	}
	d := &tls.Dialer{Config: cfg, NetDialer: &net.Dialer{Timeout: r.timeout}}
	conn, herr := d.DialContext(r.ctx, "tcp", s.addr)
	want := strings.Join(st.arrow, " ")
	if herr != nil {
		r.tl.add(laneAgent, fmt.Sprintf("TLS handshake with %s (max %s) refused: %v", arg(st, 0), st.opt("max", "-"), herr))
		if arg(scStep{args: st.arrow}, 0) != "refused" {
			return fmt.Errorf("TLS handshake with %s: %w, want %s", arg(st, 0), herr, want)
		}
		r.count("tls.handshake.refused", 1)
		return nil
	}
	defer conn.Close()
	cs := conn.(*tls.Conn).ConnectionState()
	got := fmt.Sprintf("version %s, ALPN %q, certificate serial %s", tls.VersionName(cs.Version), cs.NegotiatedProtocol,
		cs.PeerCertificates[0].SerialNumber)
	r.tl.add(laneAgent, fmt.Sprintf("TLS handshake with %s: %s", arg(st, 0), got))
	if arg(scStep{args: st.arrow}, 0) != "ok" {
		return fmt.Errorf("TLS handshake with %s succeeded (%s), want %s", arg(st, 0), got, want)
	}
	for _, w := range st.arrow[1:] {
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "cert":
			leaf := t.leaves[v]
			if leaf == nil || leaf.Cert.SerialNumber.Cmp(cs.PeerCertificates[0].SerialNumber) != 0 {
				return fmt.Errorf("TLS handshake with %s presented %s, want certificate %s", arg(st, 0), got, v)
			}
		case "alpn":
			if cs.NegotiatedProtocol != v {
				return fmt.Errorf("TLS handshake with %s: %s, want ALPN %s", arg(st, 0), got, v)
			}
		default:
			return fmt.Errorf("tls-handshake: unknown expectation %q", w)
		}
	}
	r.count("tls.handshake.ok", 1)
	return nil
}

// cmdTLSGet fetches PATH from server NAME and checks the response carries
// Strict-Transport-Security.
// Example: tls-get s1 /console ca=ca1 -> hsts
func cmdTLSGet(r *scRun, st scStep) error {
	_, s, cfg, err := r.tlsClientOf(st)
	if err != nil {
		return err
	}
	c := &http.Client{Timeout: r.timeout, Transport: &http.Transport{TLSClientConfig: cfg},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer c.CloseIdleConnections()
	resp, err := c.Get("https://" + s.addr + arg(st, 1))
	if err != nil {
		return err
	}
	resp.Body.Close()
	hsts := resp.Header.Get("Strict-Transport-Security")
	r.tl.add(laneAgent, fmt.Sprintf("GET %s over TLS: %d, Strict-Transport-Security %q", arg(st, 1), resp.StatusCode, hsts))
	if strings.Join(st.arrow, " ") != "hsts" {
		return errors.New("want: tls-get NAME PATH ca=CA -> hsts")
	}
	if !strings.HasPrefix(hsts, "max-age=") {
		return fmt.Errorf("GET %s over TLS: no Strict-Transport-Security max-age (got %q)", arg(st, 1), hsts)
	}
	r.count("tls.hsts", 1)
	return nil
}

// cmdTLSRotate opens a keep-alive connection to server NAME (trusting CA
// ca), replaces its certificate files with CERT's the way cert-manager
// does (write beside, rename over), and sends a second request on the same
// connection: a rotation must not drop what is open. The next handshake's
// certificate is for a tls-handshake step to check.
// Example: tls-rotate s1 cert=c2 ca=ca1
func cmdTLSRotate(r *scRun, st scStep) error {
	t, s, cfg, err := r.tlsClientOf(st)
	if err != nil {
		return err
	}
	leaf := t.leaves[st.opt("cert", "")]
	if leaf == nil {
		return errors.New("want: tls-rotate NAME cert=CERT ca=CA")
	}
	c := &http.Client{Timeout: r.timeout, Transport: &http.Transport{TLSClientConfig: cfg, MaxConnsPerHost: 1}}
	defer c.CloseIdleConnections()
	get := func() (reused bool, err error) {
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(r.ctx, trace), http.MethodGet, "https://"+s.addr+"/healthz", nil)
		resp, err := c.Do(req)
		if err != nil {
			return false, err
		}
		_, _ = io.Copy(io.Discard, resp.Body) // read to the end, or the connection is not kept
		resp.Body.Close()
		return reused, nil
	}
	if _, err := get(); err != nil {
		return fmt.Errorf("before the rotation: %w", err)
	}
	if err := leaf.Write(s.certFile, s.keyFile); err != nil {
		return err
	}
	reused, err := get()
	switch {
	case err != nil:
		return fmt.Errorf("the connection opened before the rotation failed after it: %w", err)
	case !reused:
		return errors.New("the connection opened before the rotation was not reused after it: the rotation dropped it")
	}
	r.count("tls.rotated", 1)
	r.tl.add(laneGateway, fmt.Sprintf("%s: certificate files replaced by %s's; the open connection served on", arg(st, 0), st.opt("cert", "")))
	return nil
}

// scLines is a slog handler that hands each record's message and
// attributes to a channel, for a step waiting on what an agent logged.
type scLines struct{ ch chan string }

func (h scLines) Enabled(context.Context, slog.Level) bool { return true }
func (h scLines) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h scLines) WithGroup(string) slog.Handler            { return h }
func (h scLines) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	select {
	case h.ch <- line:
	default:
	}
	return nil
}

// cmdTLSAgent runs the shipped agent (package agent, in process) against
// server NAME with --ca-file CA and --server-pin right or wrong, until its
// first session opens or its first certificate refusal is logged. A
// refusal must be one line naming the server's host and the flag that
// fixes it, the agent must have reached the listener (so the handshake
// refused it), and no request may have got through carrying its token.
// Example: tls-agent a1 via=s1 -> refused --ca-file
// Example: tls-agent a1 via=s1 ca=ca1 pin=wrong -> refused --server-pin
// Example: tls-agent a1 via=s1 ca=ca1 pin=right -> connected
func cmdTLSAgent(r *scRun, st scStep) error {
	t, err := r.tlsState()
	if err != nil {
		return err
	}
	s, err := t.server(st.opt("via", ""))
	want := arg(scStep{args: st.arrow}, 0)
	if err != nil || arg(st, 0) == "" || (want != "refused" && want != "connected") {
		return errors.New("want: tls-agent AGENT via=SERVER [ca=CA] [pin=right|wrong] -> refused FLAG | connected")
	}
	tr := agent.Transport{CAFile: t.caFiles[st.opt("ca", "")]}
	switch st.opt("pin", "") {
	case "right":
		tr.ServerPin = agent.PinOf(s.servedLeaf())
	case "wrong":
		other, err := testca.New("another key")
		if err != nil {
			return err
		}
		tr.ServerPin = agent.PinOf(other.Cert)
	}
	name := arg(st, 0)
	t.agents++
	deviceID := fmt.Sprintf("00000000-0000-4000-8000-0000000f%04x", t.agents)
	token := "device-token-tls-" + name
	if err := r.admin.CreateDevice(r.ctx, deviceID, name, []string{scService}, 1, protocol.HashCommitToken(token)); err != nil {
		return err
	}
	work, err := os.MkdirTemp(r.dir, "tls-agent-")
	if err != nil {
		return err
	}
	lines := scLines{ch: make(chan string, 64)}
	ag, err := agent.New(agent.Config{ServerURL: "https://" + s.addr, DeviceToken: token, Services: []string{scService}, Slots: 1,
		WorkDir: work, Clock: clock.Real{}, Rand: rand.New(rand.NewPCG(uint64(t.agents), 7)), Logger: slog.New(lines),
		Transport: tr, Runners: map[string]runner.Runner{scService: runner.Synthetic{Clock: clock.Real{}}},
		BackoffBase: realAgentBackoffBase, BackoffMax: realAgentBackoffMax, ShutdownTimeout: realAgentShutdown})
	if err != nil {
		return err
	}
	acceptedBefore, _ := s.counts()
	ctx, stop := context.WithCancel(context.WithoutCancel(r.ctx))
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	defer func() { stop(); <-done }()
	var line string
	deadline := time.After(r.timeout)
wait:
	for {
		select {
		case line = <-lines.ch:
			if strings.HasPrefix(line, "TLS: refused") || strings.HasPrefix(line, "session open") {
				break wait
			}
		case <-deadline:
			return fmt.Errorf("tls-agent %s: neither a session nor a certificate refusal within %v", name, r.timeout)
		}
	}
	r.tl.add(laneAgent, fmt.Sprintf("%s (ca=%s pin=%s): %s", name, st.opt("ca", "-"), st.opt("pin", "-"), line))
	accepted, reqs := s.counts()
	carried := 0
	for _, q := range reqs {
		if q.bearer == "Bearer "+token {
			carried++
		}
	}
	if want == "connected" {
		if !strings.HasPrefix(line, "session open") || carried == 0 {
			return fmt.Errorf("tls-agent %s: %s, want a session", name, line)
		}
		r.count("tls.agent.connected", 1)
		return nil
	}
	flag := arg(scStep{args: st.arrow}, 1)
	switch {
	case !strings.HasPrefix(line, "TLS: refused"):
		return fmt.Errorf("tls-agent %s: %s, want the certificate refused", name, line)
	case !strings.Contains(line, s.addr) || !strings.Contains(line, flag):
		return fmt.Errorf("tls-agent %s: the refusal %q does not name the host %s and the flag %s", name, line, s.addr, flag)
	case accepted == acceptedBefore:
		return fmt.Errorf("tls-agent %s: the agent never reached %s, so nothing shows its handshake refused it", name, s.addr)
	case carried > 0:
		return fmt.Errorf("tls-agent %s: %d requests carrying its device token reached the server it refused", name, carried)
	}
	r.count("tls.agent.refused", 1)
	return nil
}

// servedLeaf is the certificate the server's files hold now.
func (s *scTLSServer) servedLeaf() *x509.Certificate {
	pair, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		panic(fmt.Sprintf("the scenario's own certificate files do not load: %v", err))
	}
	return pair.Leaf
}

// cmdPlaintextListen starts controlplane.Run with plain HTTP on listen
// (and metrics) and checks it is refused before anything starts, the
// refusal naming the address and the flags; `ok` lets it start and stops
// it at once.
// Example: plaintext-listen listen=0.0.0.0:0 -> refused
// Example: plaintext-listen listen=127.0.0.1:0 metrics=127.0.0.1:0 -> ok
func cmdPlaintextListen(r *scRun, st scStep) error {
	cfg := controlplane.Config{DB: r.dbURL, Listen: st.opt("listen", ""), MetricsListen: st.opt("metrics", ""), Artifacts: r.dir,
		SigningKey: scSigningKey, InsecurePlaintext: st.opt("insecure", "") == "1", Log: slog.New(slog.DiscardHandler),
		PollInterval: -1, SweepInterval: -1}
	errStarted := errors.New("started")
	err := controlplane.Run(r.ctx, cfg, func(context.Context, *controlplane.Plane) error { return errStarted })
	what := fmt.Sprintf("plain HTTP on %s (metrics %s, insecure=%s)", cfg.Listen, cfg.MetricsListen, st.opt("insecure", "0"))
	switch strings.Join(st.arrow, " ") {
	case "ok":
		if !errors.Is(err, errStarted) {
			return fmt.Errorf("%s: %v, want a start", what, err)
		}
	case "refused":
		refused := cfg.Listen
		if listener.Loopback(cfg.Listen) {
			refused = cfg.MetricsListen
		}
		if err == nil || errors.Is(err, errStarted) || !strings.Contains(err.Error(), refused) ||
			!strings.Contains(err.Error(), "--insecure-plaintext") || !strings.Contains(err.Error(), "--tls-cert") {
			return fmt.Errorf("%s: %v, want a refusal naming %s, --tls-cert and --insecure-plaintext", what, err, refused)
		}
		r.count("plaintext.refused", 1)
	default:
		return errors.New("want: plaintext-listen listen=ADDR [metrics=ADDR] [insecure=1] -> refused | ok")
	}
	r.tl.add(laneGateway, fmt.Sprintf("%s: %v", what, err))
	return nil
}

// cmdAgentURL builds the shipped agent for server URL (no I/O) and checks
// plain http to a host off loopback is refused without insecure=1.
// Example: agent-url http://192.0.2.10:8080 -> refused
// Example: agent-url http://127.0.0.1:8080 -> ok
func cmdAgentURL(r *scRun, st scStep) error {
	url := arg(st, 0)
	_, err := agent.New(agent.Config{ServerURL: url, DeviceToken: "device-token-url", Services: []string{scService}, Slots: 1,
		WorkDir: r.dir, Rand: rand.New(rand.NewPCG(1, 2)), Runners: map[string]runner.Runner{scService: runner.Synthetic{}},
		Transport: agent.Transport{InsecurePlaintext: st.opt("insecure", "") == "1"}})
	r.tl.add(laneAgent, fmt.Sprintf("agent with --server %s (insecure=%s): %v", url, st.opt("insecure", "0"), err))
	switch strings.Join(st.arrow, " ") {
	case "ok":
		return err
	case "refused":
		if err == nil || !strings.Contains(err.Error(), "--insecure-plaintext") {
			return fmt.Errorf("agent with --server %s: %v, want refused naming --insecure-plaintext", url, err)
		}
		r.count("agent.plaintext.refused", 1)
		return nil
	}
	return errors.New("want: agent-url URL [insecure=1] -> refused | ok")
}

// cmdForwarded sends count buyer requests (GET /v1/jobs) to gw1 with a
// wrong or the valid API key and the X-Forwarded-For header given, and
// checks the last one's status.
// Example: forwarded 20 key=wrong xff="203.0.113.9" -> 401
// Example: forwarded 1 key=valid xff="198.51.100.8" -> 200
func cmdForwarded(r *scRun, st scStep) error {
	n, err := strconv.Atoi(arg(st, 0))
	if err != nil || len(st.arrow) != 1 {
		return errors.New("want: forwarded COUNT key=wrong|valid [xff=LIST] -> STATUS")
	}
	gw, err := r.stack(st.opt("gateway", "gw1"))
	if err != nil {
		return err
	}
	key := r.apiKey
	if st.opt("key", "valid") == "wrong" {
		key = "rmk_" + strings.Repeat("x", 43)
	}
	status := 0
	for range n {
		req, _ := http.NewRequestWithContext(r.ctx, http.MethodGet, gw.baseURL()+"/v1/jobs", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		if xff := st.opt("xff", ""); xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := r.httpc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		status = resp.StatusCode
		if status == http.StatusTooManyRequests {
			r.count("forwarded.429", 1)
		}
	}
	r.tl.add(laneAgent, fmt.Sprintf("%d buyer requests with the %s key, X-Forwarded-For %q: last %d", n, st.opt("key", "valid"), st.opt("xff", ""), status))
	if strconv.Itoa(status) != st.arrow[0] {
		return fmt.Errorf("forwarded: last status %d, want %s", status, st.arrow[0])
	}
	return nil
}
