package bench

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"github.com/olekukonko/tablewriter"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"io"
)

// writeHistoryPlot draws every latency figure of r against the history
// size (a line per figure, one point per database) as a PNG at path.
func writeHistoryPlot(r *HistoryReport, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("rendermac bench --history: latency against history (%d queued, %d devices)", r.Queued, r.Devices)
	p.X.Label.Text = "finished jobs in the database"
	p.Y.Label.Text = "ms"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	i := 0
	for _, f := range r.Figures {
		if !f.Latency {
			continue
		}
		xys := make(plotter.XYs, len(f.Values))
		for k, v := range f.Values {
			xys[k] = plotter.XY{X: float64(r.Points[k].History), Y: v}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
		points.Color, points.Shape = plotutil.Color(i), plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(f.Name, line, points)
		i++
	}
	// Latencies span three decades (a page in milliseconds, a loaded
	// commit in seconds): a log scale keeps each line readable.
	if allPositive(r.Figures) {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Label.Text = "ms (log scale)"
	}
	p.BackgroundColor = color.White
	return p.Save(11*vg.Inch, 7*vg.Inch, path)
}

func allPositive(figs []HistoryFigure) bool {
	for _, f := range figs {
		for _, v := range f.Values {
			if f.Latency && v <= 0 {
				return false
			}
		}
	}
	return true
}

// ReplotHistory reads the report in dir and draws its plot again beside it.
func ReplotHistory(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, HistoryReportName))
	if err != nil {
		return err
	}
	var r HistoryReport
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", HistoryReportName, err)
	}
	return writeHistoryPlot(&r, filepath.Join(dir, HistoryPlotName))
}

// renderTable writes rows under header.
func renderTable(w io.Writer, header []string, rows [][]string) error {
	t := tablewriter.NewWriter(w)
	h := make([]any, len(header))
	for i, s := range header {
		h[i] = s
	}
	t.Header(h...)
	for _, r := range rows {
		if err := t.Append(r); err != nil {
			return err
		}
	}
	return t.Render()
}
