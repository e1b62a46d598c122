package listener

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"

	"github.com/rendermac/rendermac/internal/certpool"
)

// Options say where a listener's certificate comes from: a certificate and
// key file (both), an ACME CA (ACME.Domains), or nowhere (plain HTTP).
type Options struct {
	CertFile, KeyFile string
	ACME              ACME
}

// ACME configures automatic certificates. autocert (golang.org/x/crypto,
// the Go team's, already in the module graph) is used rather than
// certmagic: it answers the CA's TLS-ALPN-01 challenge on the listener
// itself, so no port 80 is needed, keeps its cache as plain files, and
// brings in no further dependency; certmagic's extras (DNS challenges,
// clustered storage, OCSP stapling) are not needed by one process per
// domain.
type ACME struct {
	// Domains are the names certificates are obtained for; a handshake
	// for any other name is refused.
	Domains []string
	// Email is the account's contact address ("": none).
	Email string
	// DirectoryURL is the CA's directory ("": Let's Encrypt's production
	// CA); a staging or private CA's for tests and closed networks.
	DirectoryURL string
	// RootsFile is a PEM bundle trusted, on top of the system roots, for
	// the CA's own HTTPS (a private CA's root; "": the system roots).
	RootsFile string
	// CacheDir keeps the account key and the certificates across restarts
	// (required: without it every restart asks the CA again, and hits its
	// rate limits).
	CacheDir string
}

// Enabled reports whether o gives a certificate (TLS) rather than none.
func (o Options) Enabled() bool {
	return o.CertFile != "" || o.KeyFile != "" || len(o.ACME.Domains) > 0
}

// Check says what is wrong with o, naming the flags: a certificate without
// its key, both sources at once, ACME without a cache.
func (o Options) Check() error {
	switch {
	case (o.CertFile == "") != (o.KeyFile == ""):
		return errors.New("--tls-cert and --tls-key go together: give both files, or neither")
	case o.CertFile != "" && len(o.ACME.Domains) > 0:
		return errors.New("--tls-cert/--tls-key and --acme-domain are two sources of one certificate: give one")
	case len(o.ACME.Domains) > 0 && o.ACME.CacheDir == "":
		return errors.New("--acme-domain needs a state directory for its account and certificates (--state-dir)")
	case len(o.ACME.Domains) == 0 && (o.ACME.Email != "" || o.ACME.DirectoryURL != "" || o.ACME.RootsFile != ""):
		return errors.New("--acme-email, --acme-ca and --acme-ca-root apply only with --acme-domain")
	}
	return nil
}

// Certs is a listener's certificate source; one serves every listener of
// a process.
type Certs struct {
	files *keyPair
	acme  *autocert.Manager
}

// New opens o's certificate source: the key pair is loaded now (a file
// that does not load stops the start), the ACME manager obtains
// certificates on the first handshake for each domain. It returns nil for
// plain HTTP.
func New(o Options, log *slog.Logger) (*Certs, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	switch {
	case o.CertFile != "":
		k := &keyPair{certFile: o.CertFile, keyFile: o.KeyFile, log: log}
		if err := k.load("start"); err != nil {
			return nil, err
		}
		return &Certs{files: k}, nil
	case len(o.ACME.Domains) > 0:
		m, err := newACME(o.ACME)
		if err != nil {
			return nil, err
		}
		return &Certs{acme: m}, nil
	}
	return nil, nil
}

// Reload re-reads the certificate files now (SIGHUP), whether or not they
// look changed; with ACME it does nothing, the manager renews by itself.
func (c *Certs) Reload() error {
	if c == nil || c.files == nil {
		return nil
	}
	c.files.mu.Lock()
	defer c.files.mu.Unlock()
	return c.files.loadLocked("reload requested")
}

// Config is the TLS configuration of a listener: TLS 1.2 at least (Go's
// default cipher suites), the certificate from c at every handshake.
func (c *Certs) Config() *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.acme != nil {
		cfg.GetCertificate = c.acme.GetCertificate
		cfg.NextProtos = []string{acme.ALPNProto} // the CA's TLS-ALPN-01 challenge
	} else {
		cfg.GetCertificate = c.files.get
	}
	return cfg
}

// hstsValue keeps browsers on https for a year once they have seen it.
const hstsValue = "max-age=31536000"

// Serve serves srv on ln until it fails or shuts down: over TLS with c's
// certificates when c is non-nil (HTTP/2 and HTTP/1.1 negotiated by ALPN,
// Strict-Transport-Security on every response), in clear otherwise.
func Serve(srv *http.Server, ln net.Listener, c *Certs) error {
	if c == nil {
		return srv.Serve(ln)
	}
	srv.TLSConfig = c.Config()
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	srv.Protocols = &p
	next := srv.Handler
	if next == nil {
		next = http.DefaultServeMux
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", hstsValue)
		next.ServeHTTP(w, r)
	})
	return srv.ServeTLS(ln, "", "")
}

// keyPair is a certificate and key file pair, reloaded when either file's
// identity, size or modification time changes (checked at each handshake:
// two stat calls beside a handshake's signatures) or on Reload. A pair that
// does not load (caught between the two files' writes, say) leaves the
// previous certificate in service until the files change again.
type keyPair struct {
	certFile, keyFile string
	log               *slog.Logger

	mu   sync.Mutex
	cert *tls.Certificate
	seen [2]os.FileInfo // the files as last loaded or tried
}

func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.changed() {
		_ = k.loadLocked("files changed") // on failure the previous one serves; loadLocked logs why
	}
	return k.cert, nil
}

// changed reports whether either file differs from when it was last read.
// A file missing for a moment (a rotation by delete and create) is no
// change yet.
func (k *keyPair) changed() bool {
	for i, path := range []string{k.certFile, k.keyFile} {
		fi, err := os.Stat(path)
		if err != nil {
			return false
		}
		if !sameFile(fi, k.seen[i]) {
			return true
		}
	}
	return false
}

func sameFile(a, b os.FileInfo) bool {
	return b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

func (k *keyPair) load(why string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.loadLocked(why)
}

func (k *keyPair) loadLocked(why string) error {
	for i, path := range []string{k.certFile, k.keyFile} {
		k.seen[i], _ = os.Stat(path)
	}
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		err = fmt.Errorf("TLS certificate %s and key %s: %w", k.certFile, k.keyFile, err)
		if k.cert != nil {
			k.log.Warn("TLS certificate files do not load; still serving the previous certificate", "why", why, "err", err)
		}
		return err
	}
	k.cert = &cert
	leaf := cert.Leaf
	k.log.Info("TLS certificate loaded", "why", why, "file", k.certFile, "subject", leaf.Subject.String(),
		"names", leaf.DNSNames, "ips", leaf.IPAddresses, "not_after", leaf.NotAfter.UTC().Format(time.RFC3339), "serial", leaf.SerialNumber.String())
	return nil
}

// newACME builds the ACME manager: the account and certificates cached in
// CacheDir, the terms of service accepted (by passing --acme-domain the
// operator asks for certificates from the CA on its terms), only Domains
// served.
func newACME(a ACME) (*autocert.Manager, error) {
	if err := os.MkdirAll(a.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("ACME cache: %w", err)
	}
	client := &acme.Client{DirectoryURL: a.DirectoryURL}
	if a.RootsFile != "" {
		roots, err := certpool.SystemPlus(a.RootsFile)
		if err != nil {
			return nil, fmt.Errorf("--acme-ca-root: %w", err)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		client.HTTPClient = &http.Client{Transport: tr, Timeout: time.Minute}
	}
	return &autocert.Manager{Prompt: autocert.AcceptTOS, Cache: autocert.DirCache(a.CacheDir),
		HostPolicy: autocert.HostWhitelist(a.Domains...), Email: a.Email, Client: client}, nil
}
