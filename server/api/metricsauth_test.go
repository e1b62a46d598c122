package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/api"
)

const metricsToken = "rmm_metrics-token-for-tests-0123456789"

// scrape calls h for GET /metrics from the peer remoteAddr with an
// optional bearer token, without a network.
func scrape(t *testing.T, h http.Handler, remoteAddr, token string) response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.RemoteAddr = remoteAddr
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return response{Status: rec.Code, Header: rec.Header(), Body: body}
}

func TestMetricsLoopbackOnlyByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.api.Handler()
	for _, peer := range []string{"127.0.0.1:5000", "[::1]:5000", "127.9.9.9:1"} {
		r := scrape(t, h, peer, "")
		require.Equal(t, http.StatusOK, r.Status, "peer %s", peer)
		require.Contains(t, string(r.Body), "rendermac_sessions")
	}
	for _, peer := range []string{"192.0.2.10:5000", "[2001:db8::1]:443", "[::ffff:192.0.2.1]:80"} {
		requireError(t, scrape(t, h, peer, ""), http.StatusForbidden, "forbidden")
	}
	// Through the real listener (loopback) it still answers.
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/metrics", "", nil).Status)
}

func TestMetricsBearerToken(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.MetricsTokenHash = api.HashSecret(metricsToken) })
	h := b.api.Handler()
	for name, tok := range map[string]string{"missing": "", "wrong": metricsToken + "x", "hash as token": api.HashSecret(metricsToken)} {
		r := scrape(t, h, "127.0.0.1:5000", tok)
		requireError(t, r, http.StatusUnauthorized, "unauthorized")
		require.Contains(t, r.Header.Get("WWW-Authenticate"), "Bearer", name)
	}
	// With the token any peer may scrape, loopback or not.
	for _, peer := range []string{"127.0.0.1:5000", "192.0.2.10:5000"} {
		r := scrape(t, h, peer, metricsToken)
		require.Equal(t, http.StatusOK, r.Status, "peer %s: %s", peer, r.Body)
		require.Contains(t, string(r.Body), "rendermac_sessions")
	}
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/metrics", metricsToken, nil).Status)
}

func TestMetricsOnSeparateListener(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.MetricsElsewhere = true })
	requireError(t, b.do(t, http.MethodGet, "/metrics", "", nil), http.StatusNotFound, "not_found")
	metricsSrv := httptest.NewServer(b.api.MetricsHandler())
	t.Cleanup(metricsSrv.Close)
	resp, err := metricsSrv.Client().Get(metricsSrv.URL + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// The refused scrape on the API listener was counted, as a route-less 404.
	require.Contains(t, string(body), `rendermac_http_requests_total{route="unmatched",status="404"} 1`)
	// The operator chose the metrics address, so any peer is answered there...
	require.Equal(t, http.StatusOK, scrape(t, b.api.MetricsHandler(), "192.0.2.10:5000", "").Status)
	// ...and nothing else is served on it.
	rec := httptest.NewRecorder()
	b.api.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/jobs", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
}

func TestMetricsSeparateListenerWithToken(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) {
		c.MetricsElsewhere = true
		c.MetricsTokenHash = api.HashSecret(metricsToken)
	})
	h := b.api.MetricsHandler()
	requireError(t, scrape(t, h, "192.0.2.10:5000", ""), http.StatusUnauthorized, "unauthorized")
	requireError(t, scrape(t, h, "127.0.0.1:5000", "nope"), http.StatusUnauthorized, "unauthorized")
	require.Equal(t, http.StatusOK, scrape(t, h, "192.0.2.10:5000", metricsToken).Status)
}
