package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/api"
)

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, http.MethodGet, "/healthz", "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "ok", r.json(t)["status"])
	r = b.do(t, http.MethodGet, "/readyz", "", nil)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)

	// A schema behind the API's needs is not ready.
	_, err := b.pool.Exec(context.Background(), `DELETE FROM goose_db_version WHERE version_id >= $1`, api.SchemaVersion)
	require.NoError(t, err)
	requireError(t, b.do(t, http.MethodGet, "/readyz", "", nil), http.StatusServiceUnavailable, "not_ready")
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/healthz", "", nil).Status, "liveness ignores the database")
}

func TestMetricsCountRequestsByRoute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.do(t, http.MethodGet, "/v1/jobs/"+missingID, b.key, nil)
	b.do(t, http.MethodGet, "/v1/jobs/"+missingID, b.key, nil)
	b.do(t, http.MethodGet, "/v1/artifacts/inputs/x", "", nil)
	b.do(t, http.MethodGet, "/no/such/path", "", nil)
	r := b.do(t, http.MethodGet, "/metrics", "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	body := string(r.Body)
	for _, want := range []string{
		`rendermac_http_requests_total{route="GET /v1/jobs/{id}",status="404"} 2`,
		`rendermac_http_requests_total{route="GET /v1/artifacts/{key...}",status="401"} 1`,
		`rendermac_http_requests_total{route="unmatched",status="404"} 1`,
	} {
		require.True(t, strings.Contains(body, want), "metrics lack %s", want)
	}
}

func TestRoutingErrorsAreJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	requireError(t, b.do(t, http.MethodGet, "/v2/anything", "", nil), http.StatusNotFound, "not_found")
	r := b.do(t, http.MethodDelete, "/v1/jobs", b.key, nil)
	requireError(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
	require.Equal(t, "GET, POST", r.Header.Get("Allow"))
	// The device gateway is mounted at its path and nowhere else.
	require.Equal(t, http.StatusTeapot, b.do(t, http.MethodGet, "/v1/provider/ws", "", nil).Status)
}
