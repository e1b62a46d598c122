package controlplane_test

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

// scrape reads /metrics from p (loopback: no token needed) and returns the
// value of each sample line, keyed by name{labels}.
func scrape(t *testing.T, w *world, p *proc) map[string]float64 {
	t.Helper()
	resp, err := w.client.Get(p.base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	out := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^(rendermac_[a-z_]+(?:\{[^}]*\})?) (\S+)$`).FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err)
		out[m[1]] = v
	}
	return out
}

// The queue and fleet gauges are read from Postgres at scrape time: two
// jobs queued with no device, then one leased by a device that came online.
func TestServerQueueAndFleetGauges(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	p := w.start(t, "gauges", "127.0.0.1:0", "")
	waitLog(t, p, listeningMsg)
	w.createJob(t, p)
	w.createJob(t, p)

	g := scrape(t, w, p)
	require.Equal(t, 1.0, g["rendermac_gauges_up"])
	require.Equal(t, 2.0, g[`rendermac_jobs{status="queued"}`])
	require.Equal(t, 0.0, g[`rendermac_jobs{status="active"}`])
	require.Contains(t, g, `rendermac_jobs{status="cancelling"}`, "every unended status is exported, zero included")
	require.NotContains(t, g, `rendermac_jobs{status="failed"}`, "the finished jobs are not counted at a scrape")
	require.Contains(t, g, "rendermac_jobs_ended_estimate")
	require.Equal(t, 2.0, g[`rendermac_queued_jobs{service="`+service+`"}`])
	require.GreaterOrEqual(t, g[`rendermac_queued_oldest_age_seconds{service="`+service+`"}`], 0.0)
	require.Less(t, g[`rendermac_queued_oldest_age_seconds{service="`+service+`"}`], 120.0)
	require.Equal(t, 0.0, g["rendermac_devices_online"])
	require.Equal(t, 0.0, g["rendermac_live_attempts"])

	c := dial(t, p, w.pair(t, p), 1)
	deviceclient.Expect[protocol.LeaseOffer](t, c)
	g = scrape(t, w, p)
	require.Equal(t, 1.0, g[`rendermac_jobs{status="queued"}`])
	require.Equal(t, 1.0, g[`rendermac_jobs{status="active"}`])
	require.Equal(t, 1.0, g[`rendermac_queued_jobs{service="`+service+`"}`])
	require.Equal(t, 1.0, g["rendermac_devices_online"])
	require.Equal(t, 1.0, g["rendermac_live_attempts"])
}
