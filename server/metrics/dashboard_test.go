package metrics

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/dbstat"
)

// served is a Metrics as the server registers it (controlplane.Run).
func served() *Metrics {
	m := New()
	m.RegisterDB(&dbstat.Counter{})
	m.RegisterGauges(func(context.Context) (Gauges, error) { return Gauges{}, nil })
	return m
}

var metricRef = regexp.MustCompile(`\brendermac_[a-z0-9_]+`)

// Every query of deploy/grafana-dashboard.json names only metrics the
// server exports (a histogram through its _bucket, _sum or _count
// series), and the dashboard shows each queue and fleet gauge.
func TestDashboardQueriesNameExportedMetrics(t *testing.T) {
	names := served().MetricNames()
	for _, want := range []string{"rendermac_jobs", "rendermac_queued_jobs", "rendermac_queued_oldest_age_seconds",
		"rendermac_devices_online", "rendermac_live_attempts", "rendermac_leases_total", "rendermac_db_round_trips_total"} {
		require.Contains(t, names, want, "the registry")
	}
	exported := func(ref string) bool {
		if slices.Contains(names, ref) {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(ref, suffix); ok && slices.Contains(names, base) {
				return true
			}
		}
		return false
	}

	data, err := os.ReadFile("../../deploy/grafana-dashboard.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(data, &dash))
	shown := map[string]bool{}
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, q := range p.Targets {
			refs := metricRef.FindAllString(q.Expr, -1)
			require.NotEmpty(t, refs, "panel %q: %q names no rendermac metric", p.Title, q.Expr)
			for _, r := range refs {
				require.True(t, exported(r), "panel %q queries %s, which the server does not export", p.Title, r)
				shown[r] = true
			}
		}
	}
	for _, g := range []string{"rendermac_jobs", "rendermac_jobs_ended_estimate", "rendermac_queued_jobs",
		"rendermac_queued_oldest_age_seconds", "rendermac_devices_online", "rendermac_live_attempts"} {
		require.True(t, shown[g], "the dashboard does not show %s", g)
	}
	require.False(t, exported("rendermac_jobs_total"), "the check refuses a name the server does not export")
}
