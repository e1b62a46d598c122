package controlplane_test

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

var metricsLine = regexp.MustCompile(`msg="rendermac server listening" .*metrics=(\S+)`)

// A real `rendermac server --metrics-listen ... --metrics-token-file ...`:
// /metrics leaves the API listener, the metrics listener wants the token,
// and the token appears nowhere in the log.
func TestServerMetricsListenerWithToken(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const token = "metrics-token-0123456789abcdef"
	tokenFile := filepath.Join(t.TempDir(), "metrics.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	p := w.start(t, "metrics", "127.0.0.1:0", "", "--metrics-listen", "127.0.0.1:0", "--metrics-token-file", tokenFile,
		"--log-level", "debug")
	m := metricsLine.FindStringSubmatch(p.logs.String())
	require.NotNil(t, m, "log: %s", p.logs.String())
	metricsURL := "http://" + m[1] + "/metrics"

	get := func(url, bearer string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := w.client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	status, _ := get(p.base+"/metrics", token)
	require.Equal(t, http.StatusNotFound, status, "/metrics is off the API listener")
	status, body := get(metricsURL, "")
	require.Equal(t, http.StatusUnauthorized, status, body)
	status, _ = get(metricsURL, "wrong-token-0123456789abcdef")
	require.Equal(t, http.StatusUnauthorized, status)
	status, body = get(metricsURL, token)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `rendermac_http_requests_total{route="GET /metrics",status="401"} 2`)
	require.NotContains(t, p.logs.String(), token, "the token is never logged")
}

func TestServerRefusesReadableMetricsToken(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	tokenFile := filepath.Join(t.TempDir(), "metrics.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("metrics-token-0123456789abcdef"), 0o644))
	cmd := exec.Command(w.bin, "server", "--db", w.db, "--artifacts", w.artifacts, "--signing-key-file", w.keyFile,
		"--listen", "127.0.0.1:0", "--metrics-token-file", tokenFile)
	cmd.Env = serverEnv("")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "readable by group or others")
	require.NotContains(t, string(out), "metrics-token-0123456789abcdef")
}
