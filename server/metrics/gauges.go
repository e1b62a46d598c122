package metrics

import (
	"context"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Gauges is the queue and the fleet at scrape time (store.Gauges has the
// same fields; the control plane converts one into the other).
type Gauges struct {
	JobsByStatus    map[string]int64
	QueuedByService map[string]int64
	OldestQueuedAge map[string]float64
	DevicesOnline   int64
	LiveAttempts    int64
	// JobsEndedEstimate is the jobs in a terminal status, estimated.
	JobsEndedEstimate int64
}

// The scrape-time gauges, read from Postgres by one batch per scrape.
var (
	gaugeJobs = prometheus.NewDesc("rendermac_jobs",
		"Jobs by status, for the statuses before a terminal one (queued, active, verifying, cancelling).", []string{"status"}, nil)
	gaugeEnded = prometheus.NewDesc("rendermac_jobs_ended_estimate",
		"Jobs in a terminal status, estimated from Postgres' row count of jobs as autovacuum or ANALYZE last left it, less the unended ones.", nil, nil)
	gaugeQueued = prometheus.NewDesc("rendermac_queued_jobs",
		"Queued jobs by service.", []string{"service"}, nil)
	gaugeOldest = prometheus.NewDesc("rendermac_queued_oldest_age_seconds",
		"Age of the oldest queued job of a service, from its creation.", []string{"service"}, nil)
	gaugeDevices = prometheus.NewDesc("rendermac_devices_online",
		"Devices whose status is online (heartbeating within the window).", nil, nil)
	gaugeLive = prometheus.NewDesc("rendermac_live_attempts",
		"Attempts in a live status (leased..committing).", nil, nil)
	gaugeUp = prometheus.NewDesc("rendermac_gauges_up",
		"1 if the last scrape read the queue and fleet gauges from Postgres, 0 if that read failed.", nil, nil)
)

// gaugeTimeout bounds the read of one scrape.
const gaugeTimeout = 5 * time.Second

type gaugeCollector struct {
	read func(context.Context) (Gauges, error)
}

// RegisterGauges exports the queue and fleet gauges on m's registry,
// calling read at each scrape.
func (m *Metrics) RegisterGauges(read func(context.Context) (Gauges, error)) {
	m.register(gaugeCollector{read})
}

func (c gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{gaugeJobs, gaugeEnded, gaugeQueued, gaugeOldest, gaugeDevices, gaugeLive, gaugeUp} {
		ch <- d
	}
}

func (c gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), gaugeTimeout)
	defer cancel()
	g, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(gaugeUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(gaugeUp, prometheus.GaugeValue, 1)
	for _, k := range sortedKeys(g.JobsByStatus) {
		ch <- prometheus.MustNewConstMetric(gaugeJobs, prometheus.GaugeValue, float64(g.JobsByStatus[k]), k)
	}
	for _, k := range sortedKeys(g.QueuedByService) {
		ch <- prometheus.MustNewConstMetric(gaugeQueued, prometheus.GaugeValue, float64(g.QueuedByService[k]), k)
		ch <- prometheus.MustNewConstMetric(gaugeOldest, prometheus.GaugeValue, g.OldestQueuedAge[k], k)
	}
	ch <- prometheus.MustNewConstMetric(gaugeDevices, prometheus.GaugeValue, float64(g.DevicesOnline))
	ch <- prometheus.MustNewConstMetric(gaugeLive, prometheus.GaugeValue, float64(g.LiveAttempts))
	ch <- prometheus.MustNewConstMetric(gaugeEnded, prometheus.GaugeValue, float64(g.JobsEndedEstimate))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
