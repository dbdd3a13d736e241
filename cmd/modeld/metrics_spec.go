package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/modeld/modeld/backends/llama"
)

// specDecodeMetrics are the chat models' speculative-decoding counters
// (prompt lookup, backends/llama/engine/lookup.go) under the names and the
// model_name label of vLLM: vllm:spec_decode_num_drafts_total counts the
// decode steps that carried a draft, ..._num_draft_tokens_total the tokens
// drafted, ..._num_accepted_tokens_total those the model's own choice kept
// (the acceptance rate is accepted over drafted; each kept token is one
// decode step saved). They are series of chatMetrics, added from the same
// runner counters (llama.Stats), so they cover loaded store models only.
type specDecodeMetrics struct {
	drafts   *prometheus.CounterVec
	drafted  *prometheus.CounterVec
	accepted *prometheus.CounterVec
}

func newSpecDecodeMetrics() *specDecodeMetrics {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"model_name"})
	}
	return &specDecodeMetrics{
		drafts:   vec("vllm:spec_decode_num_drafts_total", "Decode steps that carried a prompt-lookup draft, by model id."),
		drafted:  vec("vllm:spec_decode_num_draft_tokens_total", "Tokens drafted by prompt lookup, by model id."),
		accepted: vec("vllm:spec_decode_num_accepted_tokens_total", "Drafted tokens the model's own choice kept, by model id."),
	}
}

func (p *specDecodeMetrics) vecs() []*prometheus.CounterVec {
	return []*prometheus.CounterVec{p.drafts, p.drafted, p.accepted}
}

// loaded makes model id's series show their zeros.
func (p *specDecodeMetrics) loaded(id string) {
	for _, v := range p.vecs() {
		v.WithLabelValues(id)
	}
}

// add counts what st has beyond last, for model id.
func (p *specDecodeMetrics) add(id string, last, st llama.Stats) {
	p.drafts.WithLabelValues(id).Add(float64(st.Drafts - last.Drafts))
	p.drafted.WithLabelValues(id).Add(float64(st.DraftTokens - last.DraftTokens))
	p.accepted.WithLabelValues(id).Add(float64(st.AcceptedTokens - last.AcceptedTokens))
}
