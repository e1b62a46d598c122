package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/store"
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
	id := b.newJob(t)
	outputKey := protocol.OutputKey(id, b.lease(t).AttemptID)
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

// The output is write-once from its claim on: an upload with a valid,
// unexpired grant is published while the attempt is in a lease phase,
// refused 409 output_sealed once commit transaction 1 claimed it
// (committing: verification reads what will be served) and after the job
// succeeded, and the committed bytes are what downloads get. An output key
// of no attempt takes no upload either.
func TestOutputIsSealedFromItsClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.newJob(t)
	offer := b.lease(t)
	key := protocol.OutputKey(id, offer.AttemptID)
	put := b.grantPath(t, grant.Put, key, time.Hour)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPut, put, "", []byte("draft")).Status, "leased: uploads go")
	_, err := b.svc.Progress(ctx, b.clock(), deviceID, protocol.Progress{JobID: id, AttemptID: offer.AttemptID,
		LeaseEpoch: 1, Phase: protocol.AttemptUploading})
	require.NoError(t, err)
	content := mp4.Synthetic(mp4.SyntheticParams{Seed: offer.AttemptID})
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPut, put, "", content).Status, "uploading: uploads go")
	sum := sha256.Sum256(content)
	c := protocol.Commit{JobID: id, AttemptID: offer.AttemptID, LeaseEpoch: 1, CommitToken: offer.CommitToken,
		Output: protocol.Output{Key: key, Bytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}}
	r, err := b.svc.CommitBegin(ctx, b.clock(), deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCommitPending, r.Code, "%+v", r)

	late := b.do(t, http.MethodPut, put, "", []byte("swapped after the claim"))
	requireError(t, late, http.StatusConflict, "output_sealed")
	require.Contains(t, late.json(t)["message"], "is committing")
	t.Logf("PUT while committing: %d %s", late.Status, late.Body)

	ok, err := b.svc.Verify(ctx, id, offer.AttemptID)
	require.NoError(t, err)
	require.True(t, ok, "verification reads the bytes the claim named")
	r, err = b.svc.CommitFinish(ctx, b.clock(), id, offer.AttemptID, ok)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCommitOK, r.Code)

	late = b.do(t, http.MethodPut, put, "", []byte("swapped after commit_ok"))
	requireError(t, late, http.StatusConflict, "output_sealed")
	require.Contains(t, late.json(t)["message"], "is succeeded")
	t.Logf("PUT after commit_ok: %d %s", late.Status, late.Body)
	got := b.do(t, http.MethodGet, b.grantPath(t, grant.Get, key, time.Minute), "", nil)
	require.Equal(t, http.StatusOK, got.Status)
	require.Equal(t, content, got.Body, "downloads get the committed bytes")
	vs, err := store.CheckOutputs(ctx, b.pool, b.store)
	require.NoError(t, err)
	require.Empty(t, vs)

	// Tampering behind the API's back is what CheckOutputs exists to see.
	_, err = b.store.Put(ctx, key, bytes.NewReader([]byte("tampered")))
	require.NoError(t, err)
	vs, err = store.CheckOutputs(ctx, b.pool, b.store)
	require.NoError(t, err)
	require.Len(t, vs, 1)
	require.Contains(t, vs[0].String(), "invariant 8: succeeded job "+id+": stored output "+key+" is 8 bytes")

	requireError(t, b.do(t, http.MethodPut, b.grantPath(t, grant.Put, outputKey, time.Minute), "", []byte("x")),
		http.StatusConflict, "output_sealed")
}
