package loadgen

import (
	"net/http"
	"net/http/httptest"
)

// HandlerTransport is an http.RoundTripper that serves every request with
// Handler in process, so a Buyer can drive an API handler that has no
// listener (the fault harness's stack target calls its handler directly).
// The handler sees the request as httptest.NewRequest builds it, for the
// request's path and query, with the request's headers, body and length.
type HandlerTransport struct {
	Handler http.Handler
}

// RoundTrip implements http.RoundTripper.
func (t HandlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	in := httptest.NewRequestWithContext(req.Context(), req.Method, req.URL.RequestURI(), req.Body)
	in.Header = req.Header.Clone()
	in.ContentLength = req.ContentLength
	rec := httptest.NewRecorder()
	t.Handler.ServeHTTP(rec, in)
	if req.Body != nil {
		_ = req.Body.Close() // a RoundTripper closes the body, even on errors
	}
	return rec.Result(), nil
}
