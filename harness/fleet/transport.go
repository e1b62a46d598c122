package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"path/filepath"
	"time"

	"github.com/rendermac/rendermac/harness/testca"
)

// Transport is what the report and the card say about the fleet's wire:
// its gateways serve TLS as an operator's would, and its agents verify them.
const Transport = "TLS: gateways with --tls-cert (a CA the run makes), agents with --ca-file, sessions over wss"

// fleetTLS is the run's certificate authority and the one certificate
// (for 127.0.0.1, where the gateways and the agents' Wi-Fi proxies listen)
// every gateway serves.
type fleetTLS struct {
	caFile, certFile, keyFile string
	roots                     *x509.CertPool
}

// setupTLS makes the CA and the gateways' certificate in the run's dir and
// has the harness's own clients (buyers, readiness probes) trust the CA.
func (r *run) setupTLS() error {
	ca, err := testca.New("rendermac fleet CA")
	if err != nil {
		return err
	}
	leaf, err := ca.Issue("127.0.0.1", "localhost")
	if err != nil {
		return err
	}
	t := fleetTLS{certFile: filepath.Join(r.dir, "gateway.crt"), keyFile: filepath.Join(r.dir, "gateway.key"), roots: x509.NewCertPool()}
	if t.caFile, err = ca.WriteCA(r.dir, "fleet-ca"); err != nil {
		return err
	}
	if err := leaf.Write(t.certFile, t.keyFile); err != nil {
		return err
	}
	t.roots.AddCert(ca.Cert)
	r.tls = t
	r.httpc.Transport = r.tlsTransport()
	return nil
}

func (r *run) tlsTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: r.tls.roots, MinVersion: tls.VersionTLS12}
	return tr
}

// gatewayTLSArgs are the flags that make a gateway serve TLS.
func (r *run) gatewayTLSArgs() []string {
	return []string{"--tls-cert", r.tls.certFile, "--tls-key", r.tls.keyFile}
}

// readyClient probes /readyz, one second a try, trusting the run's CA.
func (r *run) readyClient() *http.Client {
	return &http.Client{Timeout: time.Second, Transport: r.tlsTransport()}
}
