package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/internal/s3provider"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/controlplane"
	"github.com/rendermac/rendermac/server/store"
)

// s3Stack is a stack whose artifacts live in a fresh bucket of the real
// versitygw server; it returns the stack and a store on the same bucket.
func s3Stack(t *testing.T) (*stack, *artifact.S3) {
	t.Helper()
	b := s3provider.MustBucket(t)
	// The store's own client, so its idle connections are closed before
	// TestMain's leak check.
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	s3cfg := artifact.S3Config{Endpoint: b.Endpoint, PathStyle: true, Region: b.Region,
		AccessKey: b.AccessKey, SecretKey: b.SecretKey, HTTPClient: hc}
	s := newStackWith(t, func(c *controlplane.Config) {
		c.Artifacts = "s3://" + b.Name + "/farm"
		c.S3 = s3cfg
	})
	s3cfg.Bucket, s3cfg.Prefix = b.Name, "farm/"
	st, err := artifact.NewS3(context.Background(), s3cfg)
	require.NoError(t, err)
	return s, st
}

// TestJobOnS3MovesBytesAroundTheControlPlane: with --artifacts s3://, the
// agent downloads its input and uploads its output with presigned URLs of
// the bucket, the control plane verifies and seals the output, and the
// buyer downloads the sealed copy from the bucket. The control plane's
// artifact handler answers no request at all: zero artifact bytes through it.
func TestJobOnS3MovesBytesAroundTheControlPlane(t *testing.T) {
	s, st := s3Stack(t)
	creds, _ := s.pair(runner.ServiceSynthetic)
	runAgent(t, "agent", creds, agentOptions{})

	input := mp4.Synthetic(mp4.SyntheticParams{Seed: "s3 input", MdatBytes: 3000})
	params := map[string]string{"seed": "e2e-s3", "duration_ms": "1500", "mdat_bytes": "4194304"}
	created := s.createJob(runner.ServiceSynthetic, params, input)
	d := s.waitTerminal(created.ID)
	body := s.requireSucceededOutput(d)
	require.Equal(t, syntheticOutput(t, params), body)

	// The download grant is a presigned URL of the sealed copy in the bucket.
	u, err := url.Parse(d.Output.DownloadURL)
	require.NoError(t, err)
	require.NotEqual(t, s.cfg.Listen, u.Host, "the buyer downloads from the bucket, not the control plane")
	require.Contains(t, u.Path, "/farm/sealed/"+d.Output.Key)

	// The agent's upload is in the bucket at the attempt's key, and the
	// sealed copy holds the same bytes; the input went there at creation.
	ctx := context.Background()
	for _, key := range []string{d.Output.Key, artifact.SealedKey(d.Output.Key)} {
		r, _, err := st.Open(ctx, key)
		require.NoError(t, err, key)
		got, err := io.ReadAll(r)
		require.NoError(t, err)
		require.NoError(t, r.Close())
		require.Equal(t, body, got, key)
	}
	_, err = st.Stat(ctx, artifact.InputKey(d.ID))
	require.NoError(t, err)

	// Invariant 8 over the bucket: CheckOutputs re-reads the served bytes.
	vs, err := store.CheckOutputs(ctx, s.plane.Pool, st)
	require.NoError(t, err)
	require.Empty(t, vs)

	// Measured: no request (so no byte) reached the artifact handler.
	metrics := s.metrics()
	require.Contains(t, metrics, `route="POST /v1/jobs"`, "the metrics count this stack's requests")
	require.NotContains(t, metrics, "/v1/artifacts/", "artifact bytes went through the control plane")
	t.Logf("output of %d bytes moved agent->bucket->buyer; artifact requests through the control plane: 0", len(body))
}

// metrics reads /metrics from the API listener (loopback clients may).
func (s *stack) metrics() string {
	s.t.Helper()
	resp, err := s.client.Get(s.baseURL() + "/metrics")
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(b))
	return strings.ReplaceAll(string(bytes.TrimSpace(b)), "\r", "")
}
