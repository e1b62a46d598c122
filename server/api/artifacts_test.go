package api_test

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/grant"
)

const (
	inputKey  = "inputs/00000000-0000-4000-8000-00000000a001"
	outputKey = "outputs/00000000-0000-4000-8000-00000000a001/00000000-0000-4000-8000-00000000a002.mp4"
)

// grantPath is the path and query of a grant for op on key, relative to the
// test server (the signer's public URL is a placeholder host).
func (b *bundle) grantPath(t *testing.T, op grant.Op, key string, ttl time.Duration) string {
	t.Helper()
	u, err := url.Parse(b.signer.URL(op, key, b.clock(), ttl))
	require.NoError(t, err)
	return u.Path + "?" + u.RawQuery
}

func TestArtifactPutThenGet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	content := []byte("an output")
	r := b.do(t, http.MethodPut, b.grantPath(t, grant.Put, outputKey, time.Minute), "", content)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	require.EqualValues(t, len(content), r.json(t)["bytes"])
	got := b.do(t, http.MethodGet, b.grantPath(t, grant.Get, outputKey, time.Minute), "", nil)
	require.Equal(t, http.StatusOK, got.Status)
	require.Equal(t, content, got.Body)
	require.Equal(t, "private, no-store", got.Header.Get("Cache-Control"))
	requireError(t, b.do(t, http.MethodGet, b.grantPath(t, grant.Get, inputKey, time.Minute), "", nil),
		http.StatusNotFound, "not_found")
}

func TestArtifactKeysAreValidatedFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, key := range []string{
		"inputs/../outputs/x.mp4", "../etc/passwd", "/etc/passwd", "inputs/%2e%2e/x", "inputs//x", "inputs/a%5Cb",
	} {
		// Even a grant correctly signed for the crafted key does not get it past validation.
		sig := b.grantPath(t, grant.Get, key, time.Minute)
		q := sig[strings.Index(sig, "?"):]
		for _, method := range []string{http.MethodGet, http.MethodPut} {
			r := b.do(t, method, "/v1/artifacts/"+key+q, "", nil)
			requireError(t, r, http.StatusBadRequest, "invalid_key")
		}
	}
}

func TestArtifactGrantRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, http.MethodPut, b.grantPath(t, grant.Put, inputKey, time.Minute), "", []byte("in"))
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)

	requireError(t, b.do(t, http.MethodGet, "/v1/artifacts/"+inputKey, "", nil), http.StatusUnauthorized, "grant_required")
	// A buyer's API key is no grant.
	requireError(t, b.do(t, http.MethodGet, "/v1/artifacts/"+inputKey, b.key, nil), http.StatusUnauthorized, "grant_required")

	expired := b.grantPath(t, grant.Get, inputKey, time.Minute)
	b.advance(time.Minute)
	requireError(t, b.do(t, http.MethodGet, expired, "", nil), http.StatusForbidden, "grant_expired")

	good := b.grantPath(t, grant.Get, inputKey, time.Minute)
	tampered := strings.Replace(good, "sig=", "sig=0", 1)
	requireError(t, b.do(t, http.MethodGet, tampered, "", nil), http.StatusForbidden, "grant_invalid")
	// Moving the expiry invalidates the signature.
	u, _ := url.Parse(good)
	q := u.Query()
	q.Set("exp", "9999999999")
	requireError(t, b.do(t, http.MethodGet, u.Path+"?"+q.Encode(), "", nil), http.StatusForbidden, "grant_invalid")

	// A grant for one key opens no other, and a get grant allows no put.
	other := strings.Replace(good, inputKey, "inputs/00000000-0000-4000-8000-00000000a003", 1)
	requireError(t, b.do(t, http.MethodGet, other, "", nil), http.StatusForbidden, "grant_invalid")
	requireError(t, b.do(t, http.MethodPut, good, "", []byte("evil")), http.StatusForbidden, "grant_invalid")
	put := b.grantPath(t, grant.Put, inputKey, time.Minute)
	requireError(t, b.do(t, http.MethodGet, put, "", nil), http.StatusForbidden, "grant_invalid")

	got := b.do(t, http.MethodGet, good, "", nil)
	require.Equal(t, []byte("in"), got.Body, "refused requests must not have changed the object")

	r = b.do(t, http.MethodDelete, good, "", nil)
	requireError(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
	require.Equal(t, "GET, HEAD, PUT", r.Header.Get("Allow"))
}

func TestArtifactPutIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := b.grantPath(t, grant.Put, outputKey, time.Minute)
	big := bytes.Repeat([]byte{1}, 1<<20+1)
	requireError(t, b.do(t, http.MethodPut, path, "", big), http.StatusRequestEntityTooLarge, "body_too_large")
	// Without a Content-Length the limit is hit while reading, and the key
	// stays empty.
	req, err := http.NewRequest(http.MethodPut, b.srv.URL+path, struct{ *bytes.Reader }{bytes.NewReader(big)})
	require.NoError(t, err)
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	requireError(t, b.do(t, http.MethodGet, b.grantPath(t, grant.Get, outputKey, time.Minute), "", nil),
		http.StatusNotFound, "not_found")
}
