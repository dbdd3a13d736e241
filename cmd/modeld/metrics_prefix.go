package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/modeld/modeld/backends/llama"
)

// prefixCacheMetrics are the chat models' prefix-cache counters under the
// names and the model_name label of vLLM, which inference gateways read
// (the hit rate is hits over queries): vllm:prefix_cache_queries counts
// the prompt tokens of the requests given a slot, looked up in the KV the
// slots keep; vllm:prefix_cache_hits those of them read from it instead of
// evaluated. They are series of chatMetrics, added from the same runner
// counters (llama.Stats), so they cover loaded store models only.
type prefixCacheMetrics struct {
	queries *prometheus.CounterVec
	hits    *prometheus.CounterVec
}

func newPrefixCacheMetrics() *prefixCacheMetrics {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"model_name"})
	}
	return &prefixCacheMetrics{
		queries: vec("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens: the prompt tokens of requests given a slot, by model id."),
		hits:    vec("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens: the prompt tokens read from a slot's kept KV instead of evaluated, by model id."),
	}
}

func (p *prefixCacheMetrics) vecs() []*prometheus.CounterVec {
	return []*prometheus.CounterVec{p.queries, p.hits}
}

// loaded makes model id's series show their zeros.
func (p *prefixCacheMetrics) loaded(id string) {
	for _, v := range p.vecs() {
		v.WithLabelValues(id)
	}
}

// add counts what st has beyond last, for model id.
func (p *prefixCacheMetrics) add(id string, last, st llama.Stats) {
	p.queries.WithLabelValues(id).Add(float64(st.PrefixQueryTokens - last.PrefixQueryTokens))
	p.hits.WithLabelValues(id).Add(float64(st.PrefixHitTokens - last.PrefixHitTokens))
}
