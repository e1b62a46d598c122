package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// The buyer client sends the key and the request as the API reads them,
// and turns an unwanted status into a StatusError with the API's code.
func TestBuyerCreateJobAndRefusal(t *testing.T) {
	t.Parallel()
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k1" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v1/jobs":
			data, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(data, &got)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"j1","status":"queued","service":"synthetic.mp4"}`))
		case "/v1/jobs/j1/cancel":
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"code":"job_terminal","message":"job is already terminal"}`))
		}
	}))
	defer srv.Close()
	b := &Buyer{BaseURL: srv.URL, Key: "k1", HTTP: srv.Client()}
	ctx := context.Background()

	status, job, err := b.CreateJob(ctx, JobRequest{Service: "synthetic.mp4", Params: map[string]string{"seed": "s"},
		Input: []byte("in"), MaxAttempts: new(3)})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, "j1", job.ID)
	require.Equal(t, map[string]any{"service": "synthetic.mp4", "params": map[string]any{"seed": "s"},
		"input_base64": "aW4=", "max_attempts": float64(3)}, got)

	_, _, err = b.Cancel(ctx, "j1")
	var se *StatusError
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, http.StatusConflict, se.Status)
	require.Equal(t, "job_terminal", se.API.Code)

	_, err = (&Buyer{BaseURL: srv.URL, Key: "other", HTTP: srv.Client()}).Job(ctx, "j1")
	require.True(t, errors.As(err, &se) && se.Status == http.StatusUnauthorized, "%v", err)
}

// Through HandlerTransport the handler sees the body's bytes as the client
// wrote them: a param that is not UTF-8 stays so, explicit zeros are sent,
// the Idempotency-Key travels as a header and makes a 200 a replay; a
// listing's limit and cursor travel as the query.
func TestBuyerInProcessRawBody(t *testing.T) {
	t.Parallel()
	var body []byte
	var idem, query string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/jobs":
			if r.Method == http.MethodGet {
				query = r.URL.RawQuery
				_, _ = w.Write([]byte(`{"jobs":[{"id":"j1"}],"next_cursor":"c2"}`))
				return
			}
			body, _ = io.ReadAll(r.Body)
			idem = r.Header.Get("Idempotency-Key")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"id":"j1","status":"queued"}`))
		}
	})
	b := &Buyer{BaseURL: "http://api.invalid", Key: "k1", HTTP: &http.Client{Transport: HandlerTransport{Handler: h}}}
	ctx := context.Background()

	status, job, err := b.CreateJob(ctx, JobRequest{Service: "s", Params: map[string]string{"b": "\xff\"", "a": "x\n"},
		MaxAttempts: new(0), AdmissionWindowS: new(int64(0)), IdempotencyKey: "k"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "j1", job.ID)
	require.Equal(t, "k", idem)
	require.Equal(t, `{"service":"s","max_attempts":0,"admission_window_s":0,"params":{"a":"x\u000a","b":"`+"\xff"+`\""}}`, string(body))

	_, _, err = b.CreateJob(ctx, JobRequest{Service: "s"}) // without a key, 200 is not an answer
	var se *StatusError
	require.True(t, errors.As(err, &se) && se.Status == http.StatusOK, "%v", err)
	require.Equal(t, `{"service":"s","params":null}`, string(body))

	page, err := b.ListJobs(ctx, 1, "a b")
	require.NoError(t, err)
	require.Equal(t, "limit=1&cursor=a+b", query)
	require.Equal(t, "c2", page.NextCursor)
	require.Len(t, page.Jobs, 1)
}
