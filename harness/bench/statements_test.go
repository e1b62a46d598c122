package bench

import (
	"math"
	"testing"
)

// TestMixIsTheDifferencePerJob checks that a mix is after minus before per
// job, that BEGIN/COMMIT/ROLLBACK are counted apart, that a statement under
// minCallsPerJob counts in the totals but has no row, and that rows are
// sorted by calls per job.
func TestMixIsTheDifferencePerJob(t *testing.T) {
	before := stmtCounts{
		1: {query: "SELECT  1\n FROM x", calls: 10, rows: 10, execMS: 1},
		2: {query: "COMMIT", calls: 5},
	}
	after := stmtCounts{
		1: {query: "SELECT  1\n FROM x", calls: 30, rows: 50, execMS: 5},
		2: {query: "COMMIT", calls: 25},
		3: {query: "UPDATE y", calls: 40, rows: 40, execMS: 8},
		4: {query: "SELECT rare", calls: 1},
	}
	m := mix(before, after, 25)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(m.PerJob, (20+40+1)/25.0) || !near(m.TxControlPerJob, 20/25.0) || !near(m.RowsPerJob, (40+40)/25.0) {
		t.Fatalf("totals: %+v", m)
	}
	if len(m.Statements) != 2 || m.Statements[0].Query != "UPDATE y" || m.Statements[1].Query != "SELECT 1 FROM x" {
		t.Fatalf("rows: %+v", m.Statements)
	}
	if !near(m.Statements[1].CallsPerJob, 20/25.0) || !near(m.Statements[1].MeanMS, 4.0/20) {
		t.Fatalf("SELECT row: %+v", m.Statements[1])
	}
	if e := mix(before, after, 0); e.Error == "" {
		t.Fatal("a mix over no jobs has no error")
	}
}
