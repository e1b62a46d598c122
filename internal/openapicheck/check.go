// Package openapicheck validates HTTP exchanges against an OpenAPI 3.1
// document with github.com/pb33f/libopenapi-validator, so that the tests
// that drive an API prove its document describes what it does.
//
// A Checker sits in front of a server (Handler) or inside a client
// (Transport) and judges every exchange it sees:
//
//   - every response must match the document: a documented status of the
//     operation, its headers and its body's schema;
//   - a request the document accepts is only checked through its response;
//     one the document refuses (a wrong field, no credential, a limit
//     broken) must have been refused by the server with a 4xx, else the
//     document and the server disagree about what is valid;
//   - a request for an operation the document lacks must have been answered
//     4xx with the error shape errorShape checks (the API's 404 and 405).
//
// Paths under the skipped prefixes (routes the document does not describe
// on purpose) are counted and passed through unchecked.
package openapicheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
)

// Counts are what a Checker has seen.
type Counts struct {
	// Requests and Responses are the exchanges checked.
	Requests, Responses int
	// Refused are requests the document refuses, each answered 4xx.
	Refused int
	// Undocumented are requests for an operation the document lacks.
	Undocumented int
	// Skipped are exchanges under a skipped prefix or for another host.
	Skipped int
	// Failing are the exchanges with at least one failure.
	Failing int
}

// Checker validates exchanges against one document. It is safe for
// concurrent use.
type Checker struct {
	v    validator.Validator
	skip []string
	// untyped maps a method to the media type its requests without a
	// Content-Type are validated as.
	untyped map[string]string
	// parent, when set, counts every exchange this Checker counts.
	parent *Checker

	mu       sync.Mutex
	counts   Counts
	failures []string
}

// Options tune a Checker.
type Options struct {
	// Skip are path prefixes passed through unchecked (routes the document
	// leaves out on purpose).
	Skip []string
	// UntypedBody maps a method to the media type a request body without a
	// Content-Type is validated as, for a server that reads bodies whatever
	// their Content-Type. A method it lacks: such a body is validated as
	// sent (and a document that declares a media type refuses it).
	UntypedBody map[string]string
}

// ControlPlane are the options for the control plane's API
// (server/api/openapi.json): the device WebSocket and the console are not
// in its document, and its handlers read a POST body as JSON and a PUT body
// (an artifact) as bytes whatever the Content-Type.
var ControlPlane = Options{
	Skip:        []string{"/console", "/v1/provider/ws"},
	UntypedBody: map[string]string{http.MethodPost: "application/json", http.MethodPut: "application/octet-stream"},
}

// New returns a Checker of the OpenAPI 3.1 document doc, which must itself
// be valid against the OpenAPI 3.1 schema.
func New(doc []byte, o Options) (*Checker, error) {
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		return nil, fmt.Errorf("openapicheck: parse the document: %w", err)
	}
	if v := d.GetVersion(); !strings.HasPrefix(v, "3.1") {
		return nil, fmt.Errorf("openapicheck: the document is OpenAPI %q, not 3.1", v)
	}
	v, errs := validator.NewValidator(d, config.WithFormatAssertions())
	if len(errs) > 0 {
		return nil, fmt.Errorf("openapicheck: build the validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("openapicheck: the document is not valid OpenAPI 3.1: %s", describe(verrs))
	}
	return &Checker{v: v, skip: o.Skip, untyped: o.UntypedBody}, nil
}

// Session returns a Checker of the same document that counts and records
// on its own, and also into c: one per test, c the package's total.
func (c *Checker) Session() *Checker {
	return &Checker{v: c.v, skip: c.skip, untyped: c.untyped, parent: c}
}

// Counts returns what the Checker has seen so far.
func (c *Checker) Counts() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts
}

// Failures returns one line per failing exchange, in the order seen.
func (c *Checker) Failures() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.failures...)
}

// Summary is one line of counts, for a test's log.
func (c *Checker) Summary() string {
	n := c.Counts()
	return fmt.Sprintf("openapi: %d requests, %d responses checked, %d failing "+
		"(%d requests the document refuses, all answered 4xx unless failing; %d for undocumented operations; %d skipped)",
		n.Requests, n.Responses, n.Failing, n.Refused, n.Undocumented, n.Skipped)
}

// skipped says whether path is under a skipped prefix.
func (c *Checker) skipped(path string) bool {
	for _, p := range c.skip {
		if path == p || strings.HasPrefix(path, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

func (c *Checker) countSkipped() {
	c.record(Counts{Skipped: 1}, "")
}

// record adds n (and failure, unless empty) to c and its parents.
func (c *Checker) record(n Counts, failure string) {
	for ; c != nil; c = c.parent {
		c.mu.Lock()
		c.counts.Requests += n.Requests
		c.counts.Responses += n.Responses
		c.counts.Refused += n.Refused
		c.counts.Undocumented += n.Undocumented
		c.counts.Skipped += n.Skipped
		if failure != "" {
			c.counts.Failing++
			c.failures = append(c.failures, failure)
		}
		c.mu.Unlock()
	}
}

// Check judges one exchange: req with its body reqBody, answered by resp
// whose body is respBody (only read when it is JSON). Neither body is
// consumed: the checker validates copies.
func (c *Checker) Check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) {
	if c.skipped(req.URL.Path) {
		c.countSkipped()
		return
	}
	vreq := req.Clone(req.Context())
	vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	vreq.ContentLength = int64(len(reqBody))
	if t, ok := c.untyped[req.Method]; ok && len(reqBody) > 0 && req.Header.Get("Content-Type") == "" {
		vreq.Header.Set("Content-Type", t)
	}
	vresp := *resp
	vresp.Request = vreq
	vresp.Body = io.NopCloser(bytes.NewReader(respBody))

	var fails []string
	okReq, reqErrs := c.v.ValidateHttpRequestSync(vreq)
	undocumented := len(reqErrs) > 0 && (reqErrs[0].IsPathMissingError() || reqErrs[0].IsOperationMissingError())
	refused := !okReq && !undocumented
	switch {
	case undocumented:
		if why := errorShape(resp, respBody); why != "" {
			fails = append(fails, "an operation the document lacks, answered "+why)
		}
	case refused && (resp.StatusCode < 400 || resp.StatusCode > 499):
		fails = append(fails, fmt.Sprintf("the document refuses the request (%s) but the server answered %d",
			describe(reqErrs), resp.StatusCode))
	}
	if !undocumented {
		vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
		if ok, errs := c.v.ValidateHttpResponse(vreq, &vresp); !ok {
			fails = append(fails, fmt.Sprintf("response %d: %s", resp.StatusCode, describe(errs)))
		}
	}

	n := Counts{Requests: 1, Responses: 1}
	if refused {
		n.Refused = 1
	}
	if undocumented {
		n.Undocumented = 1
	}
	failure := ""
	if len(fails) > 0 {
		failure = fmt.Sprintf("%s %s -> %d: %s; body: %s", req.Method, req.URL.Path,
			resp.StatusCode, strings.Join(fails, "; "), clip(respBody))
	}
	c.record(n, failure)
}

// errorShape says what is wrong with the answer to a request for an
// operation the document lacks ("" when nothing is): it must be a 4xx
// whose JSON body is {code, message[, field]}, both non-empty.
func errorShape(resp *http.Response, body []byte) string {
	if resp.StatusCode < 400 || resp.StatusCode > 499 {
		return fmt.Sprintf("%d, not a 4xx", resp.StatusCode)
	}
	if !isJSON(resp.Header.Get("Content-Type")) {
		return fmt.Sprintf("%d with Content-Type %q, not the JSON error shape", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Code == "" || e.Message == "" {
		return fmt.Sprintf("%d with a body that is not the error shape {code, message[, field]} (%v)", resp.StatusCode, err)
	}
	return ""
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

func describe(errs []*verrors.ValidationError) string {
	var parts []string
	for _, e := range errs {
		s := e.Message
		if e.Reason != "" {
			s += ": " + e.Reason
		}
		for _, f := range e.SchemaValidationErrors {
			s += " [" + f.Error() + "]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " | ")
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// Handler returns next behind the checker: every request it serves is
// checked with the response it wrote. The request body is read whole
// before next runs (and handed to it unchanged); the response is passed
// through as it is written and checked when next returns.
func (c *Checker) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.skipped(r.URL.Path) {
			c.countSkipped()
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "openapicheck: read the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		c.Check(r, body, &http.Response{StatusCode: rec.status, Header: w.Header().Clone(), Request: r}, rec.body.Bytes())
	})
}

// recorder passes a response through and keeps its status and its body
// (a JSON body only: artifacts are not copied).
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if isJSON(w.Header().Get("Content-Type")) {
		w.body.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Transport returns next (nil: http.DefaultTransport) behind the checker:
// every request to host (host:port) is checked with its response; requests
// to other hosts (a bucket's presigned URLs) are counted as skipped. A
// request body, and a JSON response body, is read whole and handed on
// unchanged; other response bodies are not copied.
func (c *Checker) Transport(next http.RoundTripper, host string) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripper{c: c, next: next, host: host}
}

type roundTripper struct {
	c    *Checker
	next http.RoundTripper
	host string
}

// CloseIdleConnections closes next's idle connections (http.Client's
// CloseIdleConnections reaches the transport through this method).
func (t roundTripper) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.host || t.c.skipped(req.URL.Path) {
		t.c.countSkipped()
		return t.next.RoundTrip(req)
	}
	var reqBody []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("openapicheck: read the request body: %w", err)
		}
		reqBody = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	var respBody []byte
	if isJSON(resp.Header.Get("Content-Type")) {
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("openapicheck: read the response body: %w", err)
		}
		respBody = b
		resp.Body = io.NopCloser(bytes.NewReader(b))
	}
	t.c.Check(req, reqBody, resp, respBody)
	return resp, nil
}
