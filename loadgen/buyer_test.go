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

	job, err := b.CreateJob(ctx, JobRequest{Service: "synthetic.mp4", Params: map[string]string{"seed": "s"},
		Input: []byte("in"), MaxAttempts: 3})
	require.NoError(t, err)
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
