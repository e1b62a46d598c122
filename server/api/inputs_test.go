package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/artifact"
)

// declareInput posts POST /v1/inputs for key and decodes the 201.
func (b *bundle) declareInput(t *testing.T, key string, size int, sha string) buyer.InputUpload {
	t.Helper()
	r := b.do(t, http.MethodPost, "/v1/inputs", key, fmt.Appendf(nil, `{"bytes":%d,"sha256":%q}`, size, sha))
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
	var up buyer.InputUpload
	require.NoError(t, json.Unmarshal(r.Body, &up))
	return up
}

// putInput PUTs content to an upload grant, as the grant says to.
func (b *bundle) putInput(t *testing.T, up buyer.InputUpload, content []byte) response {
	t.Helper()
	u, err := url.Parse(up.UploadURL)
	require.NoError(t, err)
	var headers []string
	for k, v := range up.UploadHeaders {
		headers = append(headers, k, v)
	}
	return b.do(t, up.UploadMethod, u.Path+"?"+u.RawQuery, "", content, headers...)
}

func sha(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

func inputJob(id string) string {
	return fmt.Sprintf(`{"service":"synthetic.mp4","params":{"seed":"a"},"input_id":%q}`, id)
}

// TestUploadedInputBecomesTheJobsInput: an input larger than the inline
// limit is declared, PUT through its grant and named by two jobs (an input
// is reusable); each job's input at inputs/{job_id} holds the bytes, and
// the job's input is the declared size and SHA-256.
func TestUploadedInputBecomesTheJobsInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	content := bytes.Repeat([]byte("frame "), 1<<15) // 192 KiB, over this API's MaxInputBytes (64 KiB)
	up := b.declareInput(t, b.key, len(content), sha(content))
	require.Equal(t, b.clock().Add(api.DefaultUploadTTL), up.ExpiresAt)
	require.Equal(t, map[string]string{"If-None-Match": "*"}, up.UploadHeaders)
	r := b.putInput(t, up, content)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	for range 2 {
		r = b.createJob(t, b.key, inputJob(up.InputID))
		require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
		id := r.json(t)["id"].(string)
		var n int64
		var s string
		require.NoError(t, b.pool.QueryRow(context.Background(),
			`SELECT input_bytes, input_sha256 FROM jobs WHERE id = $1`, id).Scan(&n, &s))
		require.Equal(t, int64(len(content)), n)
		require.Equal(t, sha(content), s)
		obj, err := artifact.Hash(context.Background(), b.store, artifact.InputKey(id))
		require.NoError(t, err)
		require.Equal(t, sha(content), obj.SHA256)
	}
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM jobs`))
}

// TestUploadedInputRefusals: every way an input_id can be wrong is a 422
// naming input_id with both values where there are two, and writes no
// job, hold or input.
func TestUploadedInputRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	content := []byte("the buyer's real input")
	short := b.declareInput(t, b.key, len(content)+1, sha(content))
	require.Equal(t, http.StatusOK, b.putInput(t, short, content).Status)
	wrongHash := b.declareInput(t, b.key, len(content), sha([]byte("something else")))
	require.Equal(t, http.StatusOK, b.putInput(t, wrongHash, content).Status)
	missing := b.declareInput(t, b.key, len(content), sha(content))
	others := b.declareInput(t, b.otherKey, len(content), sha(content))
	require.Equal(t, http.StatusOK, b.putInput(t, others, content).Status)

	for _, c := range []struct{ name, body, message string }{
		{"size mismatch", inputJob(short.InputID), fmt.Sprintf("the upload has %d bytes, declared %d", len(content), len(content)+1)},
		{"hash mismatch", inputJob(wrongHash.InputID),
			fmt.Sprintf("the upload has sha256 %s, declared %s", sha(content), sha([]byte("something else")))},
		{"missing upload", inputJob(missing.InputID), "has no upload of this buyer (declared 22 bytes)"},
		{"another buyer's input", inputJob(others.InputID), "has no upload of this buyer (declared 22 bytes)"},
		{"not an input_id", inputJob("in_nope"), "is not an input_id of POST /v1/inputs"},
		{"a path", inputJob("../" + others.InputID), "is not an input_id of POST /v1/inputs"},
		{"a nested key", inputJob(missing.InputID[:10] + "/" + missing.InputID[10:]), "is not an input_id of POST /v1/inputs"},
		{"both input fields", fmt.Sprintf(`{"service":"synthetic.mp4","input_base64":%q,"input_id":%q}`,
			base64.StdEncoding.EncodeToString(content), wrongHash.InputID), "give input_base64 or input_id, not both"},
		{"not a string", `{"service":"synthetic.mp4","input_id":5}`, "input_id must be a string, got number"},
	} {
		r := b.createJob(t, b.key, c.body)
		requireError(t, r, http.StatusUnprocessableEntity, "validation_error", "input_id")
		require.Contains(t, r.json(t)["message"], c.message, c.name)
	}
	require.Zero(t, b.count(t, `SELECT count(*) FROM jobs`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM holds`))
	require.Equal(t, balance, b.count(t, `SELECT balance_cents FROM buyers WHERE id = $1`, buyerID))
}

// TestUploadIsWriteOnce: a second PUT through the grant is 409
// input_sealed and the first bytes stay; the grant opens no other key and
// expires; a body over the upload limit is refused.
func TestUploadIsWriteOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.MaxUploadBytes = 1 << 10; c.UploadTTL = time.Minute })
	content := []byte("first")
	up := b.declareInput(t, b.key, len(content), sha(content))
	require.Equal(t, http.StatusOK, b.putInput(t, up, content).Status)
	requireError(t, b.putInput(t, up, []byte("second")), http.StatusConflict, buyer.CodeInputSealed)
	r := b.createJob(t, b.key, inputJob(up.InputID))
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)

	// The grant is for its key alone.
	other := strings.Replace(up.UploadURL, up.InputID, up.InputID[:len(up.InputID)-1]+"0", 1)
	requireError(t, b.putInput(t, buyer.InputUpload{UploadURL: other, UploadMethod: http.MethodPut}, content),
		http.StatusForbidden, buyer.CodeGrantInvalid)
	big := b.declareInput(t, b.key, 1<<10, sha(content))
	requireError(t, b.putInput(t, big, make([]byte, 1<<10+1)), http.StatusRequestEntityTooLarge, buyer.CodeBodyTooLarge)
	late := b.declareInput(t, b.key, len(content), sha(content))
	b.advance(time.Minute)
	requireError(t, b.putInput(t, late, content), http.StatusForbidden, buyer.CodeGrantExpired)
}

// TestDeclareInputRefusals: POST /v1/inputs checks bytes, then sha256.
func TestDeclareInputRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.MaxUploadBytes = 1 << 10 })
	good := sha([]byte("x"))
	for _, c := range []struct {
		body   string
		status int
		code   string
		field  string
	}{
		{`{"sha256":"` + good + `"}`, http.StatusUnprocessableEntity, "validation_error", "bytes"},
		{`{"bytes":0,"sha256":"` + good + `"}`, http.StatusUnprocessableEntity, "validation_error", "bytes"},
		{`{"bytes":1025,"sha256":"nope"}`, http.StatusRequestEntityTooLarge, buyer.CodeBodyTooLarge, "bytes"},
		{`{"bytes":1,"sha256":"` + strings.ToUpper(good) + `"}`, http.StatusUnprocessableEntity, "validation_error", "sha256"},
		{`{"bytes":1,"sha256":"` + good + `","name":"x"}`, http.StatusUnprocessableEntity, "validation_error", "name"},
	} {
		requireError(t, b.do(t, http.MethodPost, "/v1/inputs", b.key, []byte(c.body)), c.status, c.code, c.field)
	}
	requireError(t, b.do(t, http.MethodPost, "/v1/inputs", "", []byte(`{}`)), http.StatusUnauthorized, buyer.CodeUnauthorized)
}
