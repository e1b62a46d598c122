package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/protocol/buyer"
)

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func readDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, err
}

func newClient(t *testing.T, h http.Handler, opts ...client.Option) *client.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "k1", append([]client.Option{client.WithHTTPClient(srv.Client())}, opts...)...)
	require.NoError(t, err)
	return c
}

// The body is the API's as the caller gave it: a param that is not UTF-8
// stays so, explicit zeros are sent, the Idempotency-Key travels as a
// header and makes a 200 a replay; a refusal is an *Error with the API's
// code, message and field.
func TestCreateSendsTheRequestAsGiven(t *testing.T) {
	t.Parallel()
	var body []byte
	var idem, auth string
	c := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		idem, auth = r.Header.Get("Idempotency-Key"), r.Header.Get("Authorization")
		if r.Header.Get("Idempotency-Key") == "" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"code":"validation_error","message":"service is invalid","field":"service"}`))
			return
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"id":"j1","status":"queued"}`))
	}))
	ctx := context.Background()
	created, err := c.Create(ctx, client.CreateRequest{Service: "s", Params: map[string]string{"b": "\xff\"", "a": "x\n"},
		MaxAttempts: new(0), AdmissionWindowS: new(int64(0)), IdempotencyKey: "k"})
	require.NoError(t, err)
	require.True(t, created.Replayed())
	require.Equal(t, "j1", created.Job.ID)
	require.Equal(t, "k", idem)
	require.Equal(t, "Bearer k1", auth)
	require.Equal(t, `{"service":"s","max_attempts":0,"admission_window_s":0,"params":{"a":"x\u000a","b":"`+"\xff"+`\""}}`, string(body))

	created, err = c.Create(ctx, client.CreateRequest{Service: "s", Input: []byte("in")})
	require.NoError(t, err)
	require.Len(t, created.IdempotencyKey, len("rmc-")+26, "a drawn key")
	require.Equal(t, created.IdempotencyKey, idem)
	require.Equal(t, `{"service":"s","input_base64":"aW4=","params":null}`, string(body))

	_, err = c.Create(ctx, client.CreateRequest{Service: "s", NoIdempotencyKey: true})
	var e *client.Error
	require.True(t, errors.As(err, &e), "%v", err)
	require.Equal(t, http.StatusUnprocessableEntity, e.Status)
	require.Equal(t, "validation_error", e.Code)
	require.Equal(t, "service", e.Field)
	require.Equal(t, "service is invalid", e.Message)
	require.Equal(t, "POST /v1/jobs: HTTP 422 validation_error (field service): service is invalid", e.Error())
	require.Empty(t, idem, "NoIdempotencyKey sends none")
}

// List pages through next_cursor as the loop asks, passing status, limit
// and the cursor as the query; a loop that stops early reads no more.
func TestListIteratesPages(t *testing.T) {
	t.Parallel()
	var queries []string
	c := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.RawQuery)
		switch r.URL.Query().Get("cursor") {
		case "":
			_, _ = w.Write([]byte(`{"jobs":[{"id":"j3"},{"id":"j2"}],"next_cursor":"c 2"}`))
		case "c 2":
			_, _ = w.Write([]byte(`{"jobs":[{"id":"j1"}]}`))
		}
	}))
	var ids []string
	for j, err := range c.List(context.Background(), client.ListOptions{Status: "queued", Limit: 2}) {
		require.NoError(t, err)
		ids = append(ids, j.ID)
	}
	require.Equal(t, []string{"j3", "j2", "j1"}, ids)
	require.Equal(t, []string{"limit=2&status=queued", "cursor=c+2&limit=2&status=queued"}, queries)

	queries = nil
	for range c.List(context.Background(), client.ListOptions{}) {
		break
	}
	require.Len(t, queries, 1, "an early break reads no further page")
}

// Wait polls until the job is terminal, waits the server's Retry-After
// after a 429 instead of its own interval, and reports each change once.
func TestWaitHonorsRetryAfter(t *testing.T) {
	t.Parallel()
	var reads atomic.Int32
	var limitedAt, afterAt time.Time
	c := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch reads.Add(1) {
		case 1:
			_, _ = w.Write([]byte(`{"id":"j1","status":"queued"}`))
		case 2:
			limitedAt = time.Now()
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"code":"rate_limited","message":"too many requests; retry after 1s"}`))
		case 3:
			afterAt = time.Now()
			_, _ = w.Write([]byte(`{"id":"j1","status":"active"}`))
		default:
			_, _ = w.Write([]byte(`{"id":"j1","status":"succeeded"}`))
		}
	}), client.WithPollInterval(time.Millisecond, 10*time.Millisecond))
	var seen []string
	d, err := c.Wait(context.Background(), "j1", client.WaitOptions{OnChange: func(d buyer.JobDetail) { seen = append(seen, string(d.Status)) }})
	require.NoError(t, err)
	require.Equal(t, "succeeded", string(d.Status))
	require.Equal(t, []string{"queued", "active", "succeeded"}, seen)
	require.GreaterOrEqual(t, afterAt.Sub(limitedAt), time.Second, "the read after a 429 waited its Retry-After")

	// A refusal that will not pass (404) ends the wait at once.
	c = newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"code": "not_found", "message": "no such job"})
	}))
	_, err = c.Wait(context.Background(), "j1", client.WaitOptions{})
	require.Equal(t, "not_found", client.ErrorCode(err))
}

// A download is checked: the right bytes pass, a byte changed or one too
// many is an *IntegrityError, and DownloadFile keeps nothing of them.
func TestDownloadChecksTheHash(t *testing.T) {
	t.Parallel()
	payload := []byte("the output bytes")
	served := payload
	c := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(served)
	}))
	job := buyer.JobDetail{}
	job.ID = "j1"
	job.Output = &buyer.Output{Bytes: int64(len(payload)), DownloadURL: "/v1/artifacts/outputs/j1/a.mp4?sig=x"}
	job.Output.SHA256 = sha256Hex(payload)
	dir := t.TempDir()
	n, err := c.DownloadFile(context.Background(), job, dir+"/ok.mp4", nil)
	require.NoError(t, err)
	require.Equal(t, int64(len(payload)), n)

	for _, bad := range [][]byte{[]byte("the output byteS"), append(append([]byte{}, payload...), '!')} {
		served = bad
		_, err = c.DownloadFile(context.Background(), job, dir+"/bad.mp4", nil)
		var ie *client.IntegrityError
		require.True(t, errors.As(err, &ie), "%v", err)
		require.NoFileExists(t, dir+"/bad.mp4")
	}
	entries, err := readDir(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"ok.mp4"}, entries, "no partial file is left")

	job.Output = nil
	_, err = c.Download(context.Background(), job, io.Discard, nil)
	require.ErrorIs(t, err, client.ErrNoOutput)
}

// changing reads other bytes the second time: a file rewritten between
// the hashing read and the upload.
type changing struct {
	*bytes.Reader
	reads int
	other []byte
}

func (c *changing) Seek(off int64, whence int) (int64, error) {
	c.reads++
	if c.reads == 2 {
		c.Reader = bytes.NewReader(c.other)
	}
	return c.Reader.Seek(off, whence)
}

// Upload declares the size and SHA-256 it read, PUTs the same bytes to the
// grant with the grant's headers and without the API key, and refuses
// bytes that changed between the two reads.
func TestUploadDeclaresThenStreams(t *testing.T) {
	t.Parallel()
	var declared buyer.InputDeclaration
	var put []byte
	var putAuth, cond string
	c := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/inputs":
			_ = json.NewDecoder(r.Body).Decode(&declared)
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(buyer.InputUpload{InputID: "in_1", Bytes: declared.Bytes, SHA256: declared.SHA256,
				UploadURL: "/v1/artifacts/uploads/b/in_1?sig=s", UploadMethod: http.MethodPut,
				UploadHeaders: map[string]string{"If-None-Match": "*"}})
		case "/v1/artifacts/uploads/b/in_1":
			put, _ = io.ReadAll(r.Body)
			putAuth, cond = r.Header.Get("Authorization"), r.Header.Get("If-None-Match")
		}
	}))
	data := []byte(strings.Repeat("frame ", 1000))
	var last int64
	up, err := c.Upload(context.Background(), bytes.NewReader(data), int64(len(data)), func(done, total int64) { last = done })
	require.NoError(t, err)
	require.Equal(t, "in_1", up.InputID)
	require.Equal(t, buyer.InputDeclaration{Bytes: int64(len(data)), SHA256: sha256Hex(data)}, declared)
	require.Equal(t, data, put)
	require.Empty(t, putAuth, "the API key never goes to a grant URL")
	require.Equal(t, "*", cond)
	require.Equal(t, int64(len(data)), last)

	other := bytes.ToUpper(data)
	_, err = c.Upload(context.Background(), &changing{Reader: bytes.NewReader(data), other: other}, int64(len(data)), nil)
	require.ErrorContains(t, err, "the input changed while it was sent")
}
