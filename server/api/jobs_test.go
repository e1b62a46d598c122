package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/artifact"
)

func TestBuyerAuth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, header := range map[string]string{
		"none":    "",
		"wrong":   "Bearer rmk_not-a-key",
		"scheme":  "Basic " + b.key,
		"no-auth": "Bearer ",
	} {
		r := b.do(t, http.MethodGet, "/v1/jobs", "", nil, "Authorization", header)
		requireError(t, r, http.StatusUnauthorized, "unauthorized")
		require.NotEmpty(t, r.Header.Get("WWW-Authenticate"), name)
	}
	_, err := b.pool.Exec(context.Background(), `UPDATE api_keys SET revoked_at = now() WHERE buyer_id = $1`, otherBuyerID)
	require.NoError(t, err)
	requireError(t, b.do(t, http.MethodGet, "/v1/jobs", b.otherKey, nil), http.StatusUnauthorized, "unauthorized")
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/jobs", b.key, nil).Status)
	// The lower-case scheme is the same scheme (RFC 9110).
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/jobs", "", nil, "Authorization", "bearer "+b.key).Status)
}

func TestCreateJobStoresInputAndDefaults(t *testing.T) {
	t.Parallel()
	b := setup(t)
	input := []byte("the input bytes")
	sum := sha256.Sum256(input)
	r := b.createJob(t, b.key, `{"service":"synthetic.mp4","params":{"seed":"x"},"input_base64":"`+
		base64.StdEncoding.EncodeToString(input)+`"}`)
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
	job := r.json(t)
	id := job["id"].(string)
	require.Equal(t, "/v1/jobs/"+id, r.Header.Get("Location"))
	require.Equal(t, "queued", job["status"])
	require.EqualValues(t, 3, job["max_attempts"])
	require.Equal(t, map[string]any{"bytes": float64(len(input)), "sha256": hex.EncodeToString(sum[:])}, job["input"])
	require.Equal(t, []any{}, job["attempts"])
	require.Equal(t, t0.Add(3600e9).Format("2006-01-02T15:04:05Z07:00"), job["admission_deadline"])

	rd, obj, err := b.store.Open(context.Background(), artifact.InputKey(id))
	require.NoError(t, err)
	defer rd.Close()
	got, err := io.ReadAll(rd)
	require.NoError(t, err)
	require.Equal(t, input, got)
	require.EqualValues(t, len(input), obj.Bytes)

	// No input: bytes 0 and the SHA-256 of nothing; nothing stored.
	r = b.createJob(t, b.key, `{"service":"synthetic.mp4","max_attempts":1,"admission_window_s":60}`)
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
	job = r.json(t)
	empty := sha256.Sum256(nil)
	require.Equal(t, map[string]any{"bytes": float64(0), "sha256": hex.EncodeToString(empty[:])}, job["input"])
	require.EqualValues(t, 1, job["max_attempts"])
	_, err = b.store.Stat(context.Background(), artifact.InputKey(job["id"].(string)))
	require.ErrorIs(t, err, artifact.ErrNotFound)
}

func TestCreateJobValidationWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct{ body, field string }{
		{`{"service":"synthetic.mp4","max_attempts":0}`, "max_attempts"},
		{`{"service":"synthetic.mp4","max_attempts":11}`, "max_attempts"},
		{`{"service":"nope"}`, "service"},
		{`{"service":"synthetic.mp4","admission_window_s":0}`, "admission_window_s"},
		{`{"service":"synthetic.mp4","admission_window_s":9223372036854775807}`, "admission_window_s"},
		{`{"service":"synthetic.mp4","params":{"Bad Key":"v"}}`, "params"},
		{`{"service":"synthetic.mp4","params":{"k":"a\u0000b"}}`, "params"},
		{"{\"service\":\"synthetic.mp4\",\"params\":{\"k\":\"a\xffb\"}}", "params"}, // raw bytes that are not UTF-8
		{`{"service":"synthetic.mp4","input_base64":"!!!"}`, "input_base64"},
		{`{"service":"synthetic.mp4","surprise":1}`, "surprise"},
		{`{"service":"synthetic.mp4","max_attempts":"3"}`, "max_attempts"},
	} {
		requireError(t, b.createJob(t, b.key, c.body), http.StatusUnprocessableEntity, "validation_error", c.field)
	}
	long := make([]byte, 201)
	for i := range long {
		long[i] = 'k'
	}
	requireError(t, b.createJob(t, b.key, `{"service":"synthetic.mp4"}`, "Idempotency-Key", string(long)),
		http.StatusUnprocessableEntity, "validation_error", "Idempotency-Key")
	requireError(t, b.createJob(t, b.key, `{"service":`), http.StatusBadRequest, "bad_request")
	requireError(t, b.createJob(t, b.key, `{"service":"synthetic.mp4"} {}`), http.StatusBadRequest, "bad_request")
	big := base64.StdEncoding.EncodeToString(make([]byte, 1<<16+1))
	requireError(t, b.createJob(t, b.key, `{"service":"synthetic.mp4","input_base64":"`+big+`"}`),
		http.StatusRequestEntityTooLarge, "body_too_large")

	require.Zero(t, b.count(t, `SELECT count(*) FROM jobs`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM holds`))
	require.Equal(t, balance, b.count(t, `SELECT balance_cents FROM buyers WHERE id = $1`, buyerID))
}

func TestCreateJobInsufficientFunds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	requireError(t, b.createJob(t, b.poorKey, `{"service":"synthetic.mp4"}`), http.StatusPaymentRequired, "insufficient_funds")
	require.Zero(t, b.count(t, `SELECT count(*) FROM jobs`))
}

func TestCreateJobIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{"service":"synthetic.mp4","params":{"seed":"a"},"input_base64":"aGVsbG8="}`
	first := b.createJob(t, b.key, body, "Idempotency-Key", "order-1")
	require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Body)
	again := b.createJob(t, b.key, body, "Idempotency-Key", "order-1")
	require.Equal(t, http.StatusOK, again.Status, "body: %s", again.Body)
	require.Equal(t, first.json(t)["id"], again.json(t)["id"])

	requireError(t, b.createJob(t, b.key, `{"service":"synthetic.mp4","params":{"seed":"b"}}`, "Idempotency-Key", "order-1"),
		http.StatusConflict, "idempotency_conflict")
	// Keys are per buyer: another buyer's identical key is a new job.
	other := b.createJob(t, b.otherKey, body, "Idempotency-Key", "order-1")
	require.Equal(t, http.StatusCreated, other.Status)
	require.NotEqual(t, first.json(t)["id"], other.json(t)["id"])

	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM jobs`))
	require.Equal(t, balance-10, b.count(t, `SELECT balance_cents FROM buyers WHERE id = $1`, buyerID))
}

func TestTenancy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.newJob(t)
	for _, suffix := range []string{"", "/events"} {
		foreign := b.do(t, http.MethodGet, "/v1/jobs/"+id+suffix, b.otherKey, nil)
		requireError(t, foreign, http.StatusNotFound, "not_found")
		missing := b.do(t, http.MethodGet, "/v1/jobs/"+missingID+suffix, b.otherKey, nil)
		require.Equal(t, missing.Body, foreign.Body, "another buyer's job must look missing")
		requireError(t, b.do(t, http.MethodGet, "/v1/jobs/NOT-A-UUID"+suffix, b.key, nil), http.StatusNotFound, "not_found")
	}
	foreign := b.do(t, http.MethodPost, "/v1/jobs/"+id+"/cancel", b.otherKey, nil)
	requireError(t, foreign, http.StatusNotFound, "not_found")
	require.Equal(t, b.do(t, http.MethodPost, "/v1/jobs/"+missingID+"/cancel", b.otherKey, nil).Body, foreign.Body)
	list := b.do(t, http.MethodGet, "/v1/jobs", b.otherKey, nil)
	require.Equal(t, []any{}, list.json(t)["jobs"])
	// The job is untouched.
	require.Equal(t, "queued", b.do(t, http.MethodGet, "/v1/jobs/"+id, b.key, nil).json(t)["status"])
}

func TestListJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.newJob(t)
	b.advance(1e9)
	second := b.newJob(t)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/v1/jobs/"+first+"/cancel", b.key, nil).Status)

	ids := func(r response) []string {
		var out []string
		for _, j := range r.json(t)["jobs"].([]any) {
			out = append(out, j.(map[string]any)["id"].(string))
		}
		return out
	}
	require.Equal(t, []string{second, first}, ids(b.do(t, http.MethodGet, "/v1/jobs", b.key, nil)))
	require.Equal(t, []string{first}, ids(b.do(t, http.MethodGet, "/v1/jobs?status=cancelled", b.key, nil)))
	require.Equal(t, []string{second}, ids(b.do(t, http.MethodGet, "/v1/jobs?limit=1", b.key, nil)))
	requireError(t, b.do(t, http.MethodGet, "/v1/jobs?status=done", b.key, nil), http.StatusUnprocessableEntity, "validation_error", "status")
	requireError(t, b.do(t, http.MethodGet, "/v1/jobs?limit=0", b.key, nil), http.StatusUnprocessableEntity, "validation_error", "limit")
}
