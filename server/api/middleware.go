package api

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/clientaddr"
)

// routeUnmatched labels requests no route pattern matched, so that probes
// of random paths cannot blow up the metric's cardinality.
const routeUnmatched = "unmatched"

// instrument counts every request in metrics.HTTPRequests by route pattern
// and status and logs it. The log line carries method, route, path, status,
// size, duration and the client's address (behind a trusted proxy, the
// forwarded client, and the proxy as via): never the query string (grant signatures), headers
// (bearer secrets) or bodies.
func (a *API) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now() // duration for the log only, never a decision
		rec := &recorder{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				a.log.ErrorContext(r.Context(), "handler panic", "method", r.Method, "path", r.URL.Path,
					"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeError(rec, http.StatusInternalServerError, buyer.CodeInternal, "internal error")
				}
			}
			a.observe(r, rec, time.Since(start))
		}()
		next.ServeHTTP(rec, r)
	})
}

func (a *API) observe(r *http.Request, rec *recorder, took time.Duration) {
	status := rec.status
	if status == 0 {
		status = http.StatusOK // the handler wrote nothing: net/http sends 200
	}
	// The mux sets r.Pattern on the request it was handed, which is r.
	route := r.Pattern
	if route == "" || route == "/" {
		route = routeUnmatched
	}
	a.metrics.HTTPRequests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	level := slog.LevelInfo
	switch {
	case status >= 500:
		level = slog.LevelError
	case route == "GET /healthz" || route == "GET /readyz" || route == "GET /metrics":
		level = slog.LevelDebug // probes every few seconds would drown the log
	}
	attrs := []slog.Attr{slog.String("method", r.Method), slog.String("route", route), slog.String("path", r.URL.Path),
		slog.Int("status", status), slog.Int64("bytes", rec.bytes), slog.Duration("took", took),
		slog.String("client", clientHost(r))}
	if peer := clientaddr.Peer(r); peer != "" {
		attrs = append(attrs, slog.String("via", peer)) // the trusted proxy it came through
	}
	a.log.LogAttrs(r.Context(), level, "http request", attrs...)
}

// recorder remembers the status and size of a response. Unwrap lets
// http.ResponseController and the WebSocket upgrade reach the underlying
// writer's Flush and Hijack.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *recorder) WriteHeader(code int) {
	// 1xx responses other than a protocol switch are not the final status.
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// clientHost is the client's address without its port, for the log.
func clientHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
