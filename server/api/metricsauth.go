package api

import (
	"crypto/subtle"
	"net/http"
	"net/netip"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
)

// MetricsHandler serves GET /metrics alone, for a listener of its own
// (Config.MetricsElsewhere), counted and logged like the API's routes.
// There it answers any peer, since the operator chose its address, but
// still requires the bearer token when Config.MetricsTokenHash is set.
func (a *API) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.guardMetrics(false))
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, string(protocol.CodeNotFound), "this listener serves GET /metrics only")
	})
	return a.instrument(mux)
}

// guardMetrics wraps the Prometheus handler: with a token configured, a
// request must carry it as a bearer secret (compared by hash, in constant
// time); without one, and when loopbackOnly, the peer must be on loopback.
func (a *API) guardMetrics(loopbackOnly bool) http.Handler {
	next := a.metrics.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case a.cfg.MetricsTokenHash != "":
			tok := bearer(r)
			if tok == "" || subtle.ConstantTimeCompare([]byte(HashSecret(tok)), []byte(a.cfg.MetricsTokenHash)) != 1 {
				unauthorized(w, "missing or wrong bearer metrics token")
				return
			}
		case loopbackOnly && !FromLoopback(r):
			writeError(w, http.StatusForbidden, buyer.CodeForbidden,
				"/metrics answers loopback clients only; configure a metrics token or a metrics listener to scrape from elsewhere")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// FromLoopback reports whether the request's TCP peer is a loopback address.
func FromLoopback(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}
