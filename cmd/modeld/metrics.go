package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modeld/modeld/backends/llama"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/pipelines"
)

// pipelineMetrics are the daemon's own Prometheus metrics beside the
// cache's (which has the load, request and queue counters and the
// per-model gauges an inference gateway schedules on): the task pipelines'
// merged forward passes, by model — how well concurrent requests merge,
// what padding costs, and how long passes take — and, in chat, the chat
// models' token and generation counters.
type pipelineMetrics struct {
	chat      *chatMetrics
	requests  *prometheus.HistogramVec
	sequences *prometheus.HistogramVec
	seconds   *prometheus.HistogramVec
	tokens    *prometheus.CounterVec // kind: real, padded
	runs      *prometheus.CounterVec
}

func newPipelineMetrics() *pipelineMetrics {
	sizes := prometheus.ExponentialBuckets(1, 2, 11) // 1 … 1024
	return &pipelineMetrics{
		chat: newChatMetrics(),
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
	return []prometheus.Collector{m.requests, m.sequences, m.seconds, m.tokens, m.runs, m.chat}
}

// chatMetrics are the per-model counters of the chat models' generations,
// read from their runners' counters (llama.Stats): a scrape adds what each
// loaded model counted since the last one, and an unload adds its last
// counts, so the totals outlive the runner processes.
type chatMetrics struct {
	prompt      *prometheus.CounterVec
	completion  *prometheus.CounterVec
	generations *prometheus.CounterVec
	cancelled   *prometheus.CounterVec
	reevaluated *prometheus.CounterVec // idle answers evaluated again (--reuse-answers)
	prefix      *prefixCacheMetrics    // vLLM's prefix-cache counters (metrics_prefix.go)
	spec        *specDecodeMetrics     // vLLM's speculative-decoding counters (metrics_spec.go)

	mu   sync.Mutex // guards live; never held while a runner is asked
	live map[*chatInstance]llama.Stats
}

// statsTimeout bounds one question to a runner from a metrics scrape.
const statsTimeout = 2 * time.Second

func newChatMetrics() *chatMetrics {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"model"})
	}
	return &chatMetrics{
		prompt:      vec("modeld_prompt_tokens_total", "Prompt tokens of ended generations, by model id."),
		completion:  vec("modeld_completion_tokens_total", "Completion tokens of ended generations, by model id."),
		generations: vec("modeld_generations_total", "Generations ended (finished, cut, cancelled or failed), by model id."),
		cancelled:   vec("modeld_generations_cancelled_total", "Generations stopped because their request was cancelled (a client that went away or pressed Stop), by model id."),
		reevaluated: vec("modeld_answer_tokens_reevaluated_total", "Answer tokens evaluated again while the model was idle, so that the next turn reuses them (--reuse-answers), by model id."),
		prefix:      newPrefixCacheMetrics(),
		spec:        newSpecDecodeMetrics(),
		live:        map[*chatInstance]llama.Stats{},
	}
}

// runnerStats is what a chat model's runner answers about its scheduler.
type runnerStats interface {
	StatsContext(ctx context.Context) (llama.Stats, error)
}

func (c *chatInstance) stats() (llama.Stats, error) {
	r, ok := c.model.(runnerStats)
	if !ok {
		return llama.Stats{}, fmt.Errorf("model %s reports no scheduler state", c.id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	return r.StatsContext(ctx)
}

// Occupancy is cache.Occupant: the requests waiting for a slot inside the
// runner and the share of its KV cache that running requests hold.
func (c *chatInstance) Occupancy() (cache.Occupancy, error) {
	st, err := c.stats()
	if err != nil {
		return cache.Occupancy{}, err
	}
	return cache.Occupancy{Waiting: st.Waiting, KVHeld: st.KVTokens, KVTotal: st.KVCapacity}, nil
}

func (m *chatMetrics) loaded(c *chatInstance) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.live[c] = llama.Stats{}
	for _, v := range []*prometheus.CounterVec{m.prompt, m.completion, m.generations, m.cancelled, m.reevaluated} {
		v.WithLabelValues(c.id) // a loaded model shows its zeros
	}
	m.prefix.loaded(c.id)
	m.spec.loaded(c.id)
}

// unloading counts c's last generations and forgets it.
func (m *chatMetrics) unloading(c *chatInstance) {
	if m == nil {
		return
	}
	if st, err := c.stats(); err == nil {
		m.add(c, st)
	}
	m.mu.Lock()
	delete(m.live, c)
	m.mu.Unlock()
}

// add counts what st has beyond the counts last seen of c.
func (m *chatMetrics) add(c *chatInstance, st llama.Stats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.live[c]
	if !ok || st.Generations < last.Generations {
		return // unloaded meanwhile, or an answer older than one counted
	}
	m.prompt.WithLabelValues(c.id).Add(float64(st.PromptTokens - last.PromptTokens))
	m.completion.WithLabelValues(c.id).Add(float64(st.CompletionTokens - last.CompletionTokens))
	m.generations.WithLabelValues(c.id).Add(float64(st.Generations - last.Generations))
	m.cancelled.WithLabelValues(c.id).Add(float64(st.Cancelled - last.Cancelled))
	m.reevaluated.WithLabelValues(c.id).Add(float64(st.ReevaluatedTokens - last.ReevaluatedTokens))
	m.prefix.add(c.id, last, st)
	m.spec.add(c.id, last, st)
	m.live[c] = st
}

// Describe implements prometheus.Collector.
func (m *chatMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range slices.Concat([]*prometheus.CounterVec{m.prompt, m.completion, m.generations, m.cancelled, m.reevaluated}, m.prefix.vecs(), m.spec.vecs()) {
		v.Describe(ch)
	}
}

// Collect implements prometheus.Collector: it asks every loaded chat model
// for its counters first.
func (m *chatMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	live := make([]*chatInstance, 0, len(m.live))
	for c := range m.live {
		live = append(live, c)
	}
	m.mu.Unlock()
	for _, c := range live {
		if st, err := c.stats(); err == nil {
			m.add(c, st)
		}
	}
	for _, v := range slices.Concat([]*prometheus.CounterVec{m.prompt, m.completion, m.generations, m.cancelled, m.reevaluated}, m.prefix.vecs(), m.spec.vecs()) {
		v.Collect(ch)
	}
}
