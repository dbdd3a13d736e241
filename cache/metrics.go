package cache

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics of one Cache; exported through the Cache's Describe and Collect.
type metrics struct {
	loads       *prometheus.CounterVec // model (resolved ids only, else ""), result: ok, error
	loadSeconds prometheus.Histogram
	evictions   *prometheus.CounterVec // reason: budget, keep_alive, unload, crash, shutdown
	queue       prometheus.Gauge       // requests waiting, all models
	busy        *prometheus.CounterVec // reason: queue_full, memory, cooldown
	requests    *prometheus.CounterVec // model: requests granted a slot
}

func newMetrics() *metrics {
	return &metrics{
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modeld_model_loads_total", Help: "Model loads, by model id and result (ok, error); ids that name no model count under model=\"\".",
		}, []string{"model", "result"}),
		loadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "modeld_model_load_seconds", Help: "Time spent loading a model.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modeld_model_evictions_total", Help: "Models unloaded, by reason (budget, keep_alive, unload, crash, shutdown).",
		}, []string{"reason"}),
		queue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "modeld_queue_length", Help: "Requests waiting for a model slot or load, all models.",
		}),
		busy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modeld_busy_refusals_total", Help: "Requests refused at once, by reason (queue_full, memory, cooldown).",
		}, []string{"reason"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modeld_model_requests_total", Help: "Requests that got a slot on a model, by model id.",
		}, []string{"model"}),
	}
}

func (m *metrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.loads, m.loadSeconds, m.evictions, m.queue, m.busy, m.requests}
}
