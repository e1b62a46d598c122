package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rendermac/rendermac/protocol/buyer"
)

// maxReplyBytes bounds a reply body read; the API's replies are far smaller
// (a page of 500 jobs is a few hundred KiB).
const maxReplyBytes = 8 << 20

// Client is one buyer's client of the HTTP API: every API request carries
// the buyer's key as a bearer token (grant URLs, which are capabilities of
// their own, never do). It is safe for concurrent use.
type Client struct {
	base    *url.URL
	key     string
	http    *http.Client
	pollMin time.Duration
	pollMax time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends every request through h (TLS roots, proxies,
// timeouts, an in-process transport for tests).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithPollInterval sets the first and the longest interval between two
// reads of a job by Wait (defaults DefaultPollMin and DefaultPollMax).
// The interval grows by half after each read that saw no change and
// starts over after one that did.
func WithPollInterval(first, longest time.Duration) Option {
	return func(c *Client) { c.pollMin, c.pollMax = first, max(first, longest) }
}

// Defaults of WithPollInterval.
const (
	DefaultPollMin = 200 * time.Millisecond
	DefaultPollMax = 5 * time.Second
)

// New returns a client of the API at baseURL (scheme and host, and a path
// prefix if the API is mounted under one) for the buyer whose API key is
// apiKey.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("server URL %q: want http://HOST[:PORT] or https://HOST[:PORT]", baseURL)
	}
	c := &Client{base: u, key: apiKey, http: http.DefaultClient, pollMin: DefaultPollMin, pollMax: DefaultPollMax}
	for _, o := range opts {
		o(c)
	}
	if c.pollMin <= 0 {
		c.pollMin = DefaultPollMin
	}
	return c, nil
}

// BaseURL is the server's URL the client was made with.
func (c *Client) BaseURL() string { return c.base.String() }

// Error is a reply of the API with a status the call does not accept: the
// status, the API's error code, message and field when the body is the
// API's error JSON (SPEC: {"code":..., "message":...}), and the raw body.
type Error struct {
	// Method and Path are the request's (Path is "upload_url of ID" or
	// "download_url of ID" for a grant URL, which is a secret).
	Method, Path string
	Status       int
	// Code, Message and Field are the API's error body (empty when the
	// body was not the API's JSON, as a bucket's refusal is not).
	Code, Message, Field string
	// RetryAfter is the server's Retry-After header (0 when absent).
	RetryAfter time.Duration
	// Body is the reply's body as received (at most 8 MiB).
	Body []byte
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: HTTP %d", e.Method, e.Path, e.Status)
	switch {
	case e.Code != "":
		fmt.Fprintf(&b, " %s", e.Code)
		if e.Field != "" {
			fmt.Fprintf(&b, " (field %s)", e.Field)
		}
		if e.Message != "" {
			fmt.Fprintf(&b, ": %s", e.Message)
		}
	case len(e.Body) > 0:
		fmt.Fprintf(&b, ": %s", clip(e.Body, 200))
	}
	return b.String()
}

// Temporary reports whether the same request may succeed later unchanged:
// a rate limit (429), an unready or failing-over server (503, 502, 504).
func (e *Error) Temporary() bool {
	switch e.Status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// Sealed reports whether this refuses a second PUT of an uploaded input:
// 409 input_sealed from the control plane's artifact handler, 412
// Precondition Failed from a bucket (the grant's If-None-Match: *).
func (e *Error) Sealed() bool {
	return e.Status == http.StatusConflict && e.Code == buyer.CodeInputSealed || e.Status == http.StatusPreconditionFailed
}

// ErrorCode returns the API's error code of err (an *Error in its chain),
// or "" when err is not a refusal of the API.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// request is one call of the API.
type request struct {
	method, path string
	header       http.Header
	body         []byte
	want         []int
}

// do sends req with the buyer's key and decodes a reply whose status is
// one of req.want into out; another status is an *Error.
func (c *Client) do(ctx context.Context, req request, out any) (int, error) {
	var rd io.Reader
	if req.body != nil {
		rd = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, c.base.String()+req.path, rd)
	if err != nil {
		return 0, err
	}
	for k, v := range req.header {
		hr.Header[k] = v
	}
	hr.Header.Set("Authorization", "Bearer "+c.key)
	hr.Header.Set("Accept", "application/json")
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", req.method, req.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read reply: %w", req.method, req.path, err)
	}
	for _, w := range req.want {
		if resp.StatusCode == w {
			if err := json.Unmarshal(data, out); err != nil {
				return resp.StatusCode, fmt.Errorf("%s %s: a reply that is not the API's JSON %q: %w", req.method, req.path, clip(data, 200), err)
			}
			return resp.StatusCode, nil
		}
	}
	return resp.StatusCode, refusal(req.method, req.path, resp, data)
}

// refusal is the *Error of a reply with an unwanted status.
func refusal(method, path string, resp *http.Response, body []byte) *Error {
	e := &Error{Method: method, Path: path, Status: resp.StatusCode, Body: body,
		RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	var api buyer.Error
	if json.Unmarshal(body, &api) == nil { // not every refusal has the API's body
		e.Code, e.Message, e.Field = api.Code, api.Message, api.Field
	}
	return e
}

// retryAfter reads a Retry-After header: whole seconds or an HTTP date
// (RFC 9110); anything else is no advice.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// grantURL resolves a grant URL of a reply against the server's URL (a
// directory store's grants may be relative).
func (c *Client) grantURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	return c.base.ResolveReference(u).String(), nil
}

// At returns a copy of c that speaks to the API at baseURL with the same
// key and options: the same buyer through another control plane replica.
func (c *Client) At(baseURL string) (*Client, error) {
	u, err := New(baseURL, c.key)
	if err != nil {
		return nil, err
	}
	cc := *c
	cc.base = u.base
	return &cc, nil
}
