// Package metrics holds the control plane's Prometheus collectors, created
// once per process on a registry of their own so that tests can build as
// many servers as they like without colliding on the default registry.
package metrics

import (
	"net/http"
	"regexp"
	"slices"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the control plane's collectors.
type Metrics struct {
	Registry *prometheus.Registry
	// Leases counts lease offers sent.
	Leases prometheus.Counter
	// LeasesSkipped counts offer passes that ran no Lease: no job was
	// announced since a Lease found the device's services empty.
	LeasesSkipped prometheus.Counter
	// Commits counts commit results by outcome (the reply code).
	Commits *prometheus.CounterVec
	// Fails counts fail frames by the failure code the device sent
	// (failure_code; "invalid" for a code outside the contract's, so the
	// label stays bounded) and the reply (reply: fail_ok or a refusal).
	Fails *prometheus.CounterVec
	// Withdrawals counts the gateway's withdrawals of undelivered offers
	// by reply code (withdrawn, withdraw_conflict).
	Withdrawals *prometheus.CounterVec
	// Conflicts counts lease_conflict replies by reason.
	Conflicts *prometheus.CounterVec
	// Sessions is the number of open device WebSocket sessions.
	Sessions prometheus.Gauge
	// BadMessages counts frames answered with bad_message.
	BadMessages prometheus.Counter
	// Sweeps counts sweeper passes; SweepChanges what they changed by kind.
	Sweeps       prometheus.Counter
	SweepChanges *prometheus.CounterVec
	// VerifySeconds times output verification.
	VerifySeconds prometheus.Histogram
	// HTTPRequests counts API requests by route and status code.
	HTTPRequests *prometheus.CounterVec
	// Webhooks counts webhook delivery attempts by result.
	Webhooks *prometheus.CounterVec
	// RateLimited counts requests refused with 429 rate_limited, by limit.
	RateLimited *prometheus.CounterVec

	// collectors is every collector registered, for MetricNames.
	collectors []prometheus.Collector
}

// New creates and registers every collector, plus Go and process collectors.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry:      r,
		Leases:        prometheus.NewCounter(prometheus.CounterOpts{Name: "rendermac_leases_total", Help: "Lease offers sent to devices."}),
		LeasesSkipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "rendermac_leases_skipped_total", Help: "Offer passes that ran no Lease transaction: no job announced since a Lease found the device's services empty."}),
		Commits:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rendermac_commits_total", Help: "Commit results by outcome."}, []string{"outcome"}),
		Fails:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rendermac_fails_total", Help: "Fail frames by the device's failure code and the reply."}, []string{"failure_code", "reply"}),
		Withdrawals:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rendermac_offers_withdrawn_total", Help: "Undelivered lease offers the gateway withdrew, by reply code."}, []string{"code"}),
		Conflicts:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rendermac_lease_conflicts_total", Help: "lease_conflict replies by reason."}, []string{"reason"}),
		Sessions:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "rendermac_sessions", Help: "Open device sessions."}),
		BadMessages:   prometheus.NewCounter(prometheus.CounterOpts{Name: "rendermac_bad_messages_total", Help: "Frames answered with bad_message."}),
		Sweeps:        prometheus.NewCounter(prometheus.CounterOpts{Name: "rendermac_sweeps_total", Help: "Sweeper passes."}),
		SweepChanges:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rendermac_sweep_changes_total", Help: "Rows changed by the sweeper, by kind."}, []string{"kind"}),
		VerifySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rendermac_verification_seconds", Help: "Output verification time.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		HTTPRequests:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rendermac_http_requests_total", Help: "API requests by route and status."}, []string{"route", "status"}),
		Webhooks:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rendermac_webhook_deliveries_total", Help: "Webhook delivery attempts by result."}, []string{"result"}),
		RateLimited:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rendermac_rate_limited_total", Help: "Requests refused with 429 rate_limited, by limit."}, []string{"limit"}),
	}
	for _, c := range []prometheus.Collector{m.Leases, m.LeasesSkipped, m.Commits, m.Fails, m.Withdrawals, m.Conflicts, m.Sessions, m.BadMessages,
		m.Sweeps, m.SweepChanges, m.VerifySeconds, m.HTTPRequests, m.Webhooks, m.RateLimited,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		m.register(c)
	}
	return m
}

func (m *Metrics) register(c prometheus.Collector) {
	m.Registry.MustRegister(c)
	m.collectors = append(m.collectors, c)
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// MetricNames lists the name of every metric family the registry can
// export (from the collectors' descriptors, so a vector with no sample yet
// counts): what a dashboard may query.
func (m *Metrics) MetricNames() []string {
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range m.collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	var names []string
	for d := range ch {
		if n := fqName.FindStringSubmatch(d.String()); n != nil {
			names = append(names, n[1])
		}
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
