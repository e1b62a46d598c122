package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rendermac/rendermac/internal/dbstat"
)

// The database work counters (dbstat), by operation.
var (
	dbTransactions = prometheus.NewDesc("rendermac_db_transactions_total",
		"Database transactions begun, by operation.", []string{"op"}, nil)
	dbStatements = prometheus.NewDesc("rendermac_db_statements_total",
		"Database statements sent, by operation and whether a transaction was open (in_tx) or not (outside).",
		[]string{"op", "where"}, nil)
	dbRoundTrips = prometheus.NewDesc("rendermac_db_round_trips_total",
		"Database round trips (a pipelined batch is one), by operation.", []string{"op"}, nil)
)

// dbCollector exports a dbstat.Counter.
type dbCollector struct{ c *dbstat.Counter }

// RegisterDB exports c's counts on m's registry (a nil c exports nothing).
func (m *Metrics) RegisterDB(c *dbstat.Counter) {
	if c != nil {
		m.register(dbCollector{c})
	}
}

func (d dbCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- dbTransactions
	ch <- dbStatements
	ch <- dbRoundTrips
}

func (d dbCollector) Collect(ch chan<- prometheus.Metric) {
	for op, v := range d.c.Snapshot() {
		ch <- prometheus.MustNewConstMetric(dbTransactions, prometheus.CounterValue, float64(v.Transactions), op)
		ch <- prometheus.MustNewConstMetric(dbStatements, prometheus.CounterValue, float64(v.InTx), op, "in_tx")
		ch <- prometheus.MustNewConstMetric(dbStatements, prometheus.CounterValue, float64(v.Outside), op, "outside")
		ch <- prometheus.MustNewConstMetric(dbRoundTrips, prometheus.CounterValue, float64(v.RoundTrips), op)
	}
}
