package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/modeld/modeld/pipelines"
)

// pipelineMetrics are the Prometheus metrics of the task pipelines' merged
// forward passes, by model: how well concurrent requests merge, what padding
// costs, and how long passes take.
type pipelineMetrics struct {
	requests  *prometheus.HistogramVec
	sequences *prometheus.HistogramVec
	seconds   *prometheus.HistogramVec
	tokens    *prometheus.CounterVec // kind: real, padded
	runs      *prometheus.CounterVec
}

func newPipelineMetrics() *pipelineMetrics {
	sizes := prometheus.ExponentialBuckets(1, 2, 11) // 1 … 1024
	return &pipelineMetrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "modeld_pipeline_batch_requests", Help: "Requests merged into one forward pass of a task pipeline.", Buckets: sizes,
		}, []string{"model"}),
		sequences: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "modeld_pipeline_batch_sequences", Help: "Texts (or text pairs) in one forward pass of a task pipeline.", Buckets: sizes,
		}, []string{"model"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "modeld_pipeline_forward_seconds", Help: "Duration of one merged forward pass of a task pipeline.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14), // 1 ms … 8 s
		}, []string{"model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modeld_pipeline_tokens_total", Help: "Tokens fed to task pipelines: real, and padded (real plus padding).",
		}, []string{"model", "kind"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modeld_pipeline_session_runs_total", Help: "ONNX Runtime session runs that the merged forward passes were cut into.",
		}, []string{"model"}),
	}
}

// observer returns the pipelines.Options.OnPass of model id.
func (m *pipelineMetrics) observer(id string) func(pipelines.PassStats) {
	requests, sequences, seconds := m.requests.WithLabelValues(id), m.sequences.WithLabelValues(id), m.seconds.WithLabelValues(id)
	reals, padded, runs := m.tokens.WithLabelValues(id, "real"), m.tokens.WithLabelValues(id, "padded"), m.runs.WithLabelValues(id)
	return func(s pipelines.PassStats) {
		requests.Observe(float64(s.Requests))
		sequences.Observe(float64(s.Sequences))
		seconds.Observe(s.Seconds)
		reals.Add(float64(s.Tokens))
		padded.Add(float64(s.PaddedTokens))
		runs.Add(float64(s.Runs))
	}
}

func (m *pipelineMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.sequences, m.seconds, m.tokens, m.runs}
}
