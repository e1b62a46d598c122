package console_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/console"
)

// The cards page shows the history-scale bench's figures and plot when the
// cards directory holds its report, serves the plot as a PNG, and lists
// the report as no card.
func TestCardsPageShowsHistoryBench(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := setup(t, console.Config{CardsDir: dir})
	page := b.get("/console/cards", loopback)
	require.Equal(t, http.StatusOK, page.Code)
	require.NotContains(t, page.Body.String(), "History-scale bench", "no report, no section")

	report := `{"started": "2026-12-08T01:00:00Z", "points": [{"history": 0}, {"history": 1000000}],
	  "figures": [{"name": "lease p99", "unit": "ms", "values": [10.5, 11.25], "ratio_largest_to_empty": 1.07, "goal_met": true},
	              {"name": "scrape p50", "unit": "ms", "values": [5, 80], "ratio_largest_to_empty": 16, "goal_met": false}]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, console.HistoryBenchReport), []byte(report), 0o644))
	png := []byte("\x89PNG\r\n\x1a\n not really")
	require.NoError(t, os.WriteFile(filepath.Join(dir, console.HistoryBenchPlot), png, 0o644))

	page = b.get("/console/cards", loopback)
	require.Equal(t, http.StatusOK, page.Code)
	body := page.Body.String()
	require.Contains(t, body, "History-scale bench")
	require.Contains(t, body, `<img src="/console/cards/history-bench.png"`)
	require.Contains(t, body, "<th>1000000</th>")
	require.Contains(t, body, "<td>11.25</td>")
	require.Contains(t, body, `<span class="status s-failed">16.00x</span>`, "a missed goal is marked")
	require.NotContains(t, body, "not a qualification card", "the report is not listed as a card")
	require.Equal(t, 1, strings.Count(body, "1.07x"))

	plot := b.get("/console/cards/"+console.HistoryBenchPlot, loopback)
	require.Equal(t, http.StatusOK, plot.Code)
	require.Equal(t, "image/png", plot.Header().Get("Content-Type"))
	require.Equal(t, png, plot.Body.Bytes())
	require.Equal(t, http.StatusForbidden, b.get("/console/cards/"+console.HistoryBenchPlot, remote).Code)
}
