package engine

import (
	"runtime"
	"slices"

	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// newSampler builds the request's sampler chain, in llama.cpp's usual order:
// logit bias, penalties, then greedy, or top-k, top-p, min-p, temperature
// and a seeded draw. ctxSize bounds the penalty window. Only the scheduler
// goroutine calls it; the chain is freed with yz.SamplerFree.
func newSampler(s Sampling, nVocab, ctxSize int) yz.Sampler {
	chain := yz.SamplerChainInit(yz.SamplerChainDefaultParams())
	if len(s.LogitBias) > 0 {
		ids := make([]int32, 0, len(s.LogitBias))
		for id := range s.LogitBias {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		biases := make([]yz.LogitBias, len(ids))
		for i, id := range ids {
			biases[i] = yz.LogitBias{Token: yz.Token(id), Bias: s.LogitBias[id]}
		}
		yz.SamplerChainAdd(chain, yz.SamplerInitLogitBias(int32(nVocab), int32(len(biases)), &biases[0]))
		runtime.KeepAlive(biases)
	}
	repeat := s.RepeatPenalty
	if repeat == 0 {
		repeat = 1
	}
	if s.PresencePenalty != 0 || s.FrequencyPenalty != 0 || repeat != 1 {
		lastN := s.PenaltyLastN
		if lastN == 0 {
			lastN = ctxSize
		}
		yz.SamplerChainAdd(chain, yz.SamplerInitPenalties(int32(nVocab), int32(lastN), repeat,
			s.FrequencyPenalty, s.PresencePenalty))
	}
	if s.Temperature <= 0 {
		yz.SamplerChainAdd(chain, yz.SamplerInitGreedy())
		return chain
	}
	if s.TopK > 0 {
		yz.SamplerChainAdd(chain, yz.SamplerInitTopK(int32(s.TopK)))
	}
	if s.TopP > 0 && s.TopP < 1 {
		yz.SamplerChainAdd(chain, yz.SamplerInitTopP(s.TopP, 1))
	}
	if s.MinP > 0 {
		yz.SamplerChainAdd(chain, yz.SamplerInitMinP(s.MinP, 1))
	}
	yz.SamplerChainAdd(chain, yz.SamplerInitTemp(s.Temperature))
	seed := uint32(yz.DefaultSeed)
	if s.Seed != nil {
		seed = uint32(*s.Seed)
		if seed == yz.DefaultSeed {
			seed-- // llama.cpp reads DefaultSeed as "draw one"; a given seed must stay reproducible
		}
	}
	yz.SamplerChainAdd(chain, yz.SamplerInitDist(seed))
	return chain
}
