package web

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"anvil/db"
)

// Metrics is the process's Prometheus registry: Go runtime, HTTP requests by
// route and status with latency histograms, River jobs by kind and state.
type Metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// otlp counts the OpenTelemetry door's spans and log records: those
	// that held an exception and those dropped (docs/otlp.md).
	otlp *prometheus.CounterVec
}

// NewMetrics builds a registry; d may be nil (no job counts then).
func NewMetrics(d *db.DB) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anvil_http_requests_total", Help: "HTTP requests by method, route and status.",
	}, []string{"method", "route", "status"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "anvil_http_request_duration_seconds", Help: "HTTP request latency by method and route.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"method", "route"})
	m.otlp = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anvil_otlp_items_total", Help: "OTLP spans' exception events and log records taken as events, and spans and log records dropped, by signal.",
	}, []string{"signal", "outcome"})
	m.reg.MustRegister(m.requests, m.latency, m.otlp,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if d != nil {
		m.reg.MustRegister(&jobCollector{db: d})
	}
	return m
}

// Registry lets other parts of the program register their own metrics.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// jobCollector counts River's jobs by kind and state at scrape time.
type jobCollector struct{ db *db.DB }

var jobsDesc = prometheus.NewDesc("anvil_river_jobs", "River jobs by kind and state.", []string{"kind", "state"}, nil)

func (j *jobCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc }

func (j *jobCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := j.db.Pool.Query(ctx, `SELECT kind, state::text, count(*) FROM river_job GROUP BY 1, 2`)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobsDesc, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var kind, state string
		var n int64
		if err := rows.Scan(&kind, &state, &n); err != nil {
			ch <- prometheus.NewInvalidMetric(jobsDesc, err)
			return
		}
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(n), kind, state)
	}
}

// otlpItems counts one OTLP request's exceptions and dropped items.
func (m *Metrics) otlpItems(signal string, events, dropped int) {
	if m == nil {
		return
	}
	m.otlp.WithLabelValues(signal, "event").Add(float64(events))
	m.otlp.WithLabelValues(signal, "dropped").Add(float64(dropped))
}
