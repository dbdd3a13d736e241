package engine

import (
	"runtime"
	"slices"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
)

// newSampler builds the request's sampler chain, in llama.cpp's usual order:
// logit bias, penalties, then greedy, or top-k, top-p, min-p, temperature
// and a seeded draw. A grammar (GBNF, rooted at "root") comes after the
// penalties and before every filter and draw: it sets the logit of each
// token that would break it to -inf, so whatever is drawn obeys it, and once
// the grammar is complete only end-of-generation tokens remain (and before
// that none). A lazy grammar does so only from where its trigger fires in
// the output (toolcalls_lazy.go). ctxSize bounds the penalty window. Only
// the scheduler goroutine calls it; the chain is freed with yz.SamplerFree.
//
// This one chain is what a sequence without a grammar samples through. A
// sequence under a grammar samples first and constrains on rejection
// (constrain.go); the chain with the grammar first is the reference that
// path is tested against (and the order log-probabilities are read in).
func newSampler(s Sampling, vocab yz.Vocab, grammar constraint, nVocab, ctxSize int) yz.Sampler {
	shape, draw := samplerStages(s, vocab, grammar, nVocab, ctxSize)
	chain := yz.SamplerChainInit(yz.SamplerChainDefaultParams())
	yz.SamplerChainAdd(chain, shape)
	yz.SamplerChainAdd(chain, draw)
	return chain
}

// samplerStages is newSampler's chain as two chains applied in turn: shape
// (logit bias, penalties, grammar: what changes the distribution) and draw
// (greedy, or the filters and the seeded draw: what picks from it).
// Log-probabilities are read between the two (logprobs.go).
func samplerStages(s Sampling, vocab yz.Vocab, grammar constraint, nVocab, ctxSize int) (shape, draw yz.Sampler) {
	shape = shapeChain(s, nVocab, ctxSize)
	if g := grammarStage(vocab, grammar); g != 0 {
		yz.SamplerChainAdd(shape, g)
	}
	return shape, drawChain(s)
}

// shapeChain is the logit bias and the penalties of s.
func shapeChain(s Sampling, nVocab, ctxSize int) yz.Sampler {
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
	return chain
}

// grammarStage is the sampler of grammar: a lazy grammar's stage chain, a
// new grammar sampler from the first token on, or 0 for none.
func grammarStage(vocab yz.Vocab, grammar constraint) yz.Sampler {
	if grammar.stage != 0 {
		return grammar.stage // a lazy grammar's place (toolcalls_lazy.go)
	}
	if grammar.text != "" && grammar.trig == nil {
		// Generate checked that the grammar parses, so this is not 0.
		return grammar.sampler(vocab)
	}
	return 0
}

// drawChain is greedy, or the filters, the temperature and the seeded draw
// of s.
func drawChain(s Sampling) yz.Sampler {
	draw := yz.SamplerChainInit(yz.SamplerChainDefaultParams())
	if s.Temperature <= 0 {
		yz.SamplerChainAdd(draw, yz.SamplerInitGreedy())
		return draw
	}
	if s.TopK > 0 {
		yz.SamplerChainAdd(draw, yz.SamplerInitTopK(int32(s.TopK)))
	}
	if s.TopP > 0 && s.TopP < 1 {
		yz.SamplerChainAdd(draw, yz.SamplerInitTopP(s.TopP, 1))
	}
	if s.MinP > 0 {
		yz.SamplerChainAdd(draw, yz.SamplerInitMinP(s.MinP, 1))
	}
	yz.SamplerChainAdd(draw, yz.SamplerInitTemp(s.Temperature))
	yz.SamplerChainAdd(draw, yz.SamplerInitDist(drawSeed(s, 0)))
	return draw
}

// drawSeed is the seed of s's random draw number k (a sequence's draws
// are independent streams); llama.cpp's "draw one" when s has no seed.
func drawSeed(s Sampling, k uint32) uint32 {
	if s.Seed == nil {
		return uint32(yz.DefaultSeed)
	}
	seed := uint32(*s.Seed) ^ (k * 0x9e3779b9)
	if seed == yz.DefaultSeed {
		seed-- // llama.cpp reads DefaultSeed as "draw one"; a given seed must stay reproducible
	}
	return seed
}

// grammarRoot is the start rule of a response-format grammar (the rule
// package backends/llama/grammar roots its grammars at).
const grammarRoot = "root"

// checkGrammar reports, as a *backends.BadRequestError on response_format,
// a grammar llama.cpp's parser refuses, and a structured response format
// that arrived without its grammar; nil for free text. It may run on any
// goroutine: it reads only the vocabulary.
func checkGrammar(vocab yz.Vocab, f backends.ResponseFormat) error {
	if f.IsText() {
		return nil
	}
	if f.Grammar == "" {
		return &backends.BadRequestError{Param: "response_format", Message: "response_format " + string(f.Type) + " reached the llama engine without its grammar"}
	}
	g := yz.SamplerInitGrammar(vocab, f.Grammar, grammarRoot)
	if g == 0 {
		return &backends.BadRequestError{Param: "response_format", Message: "the response_format grammar does not parse"}
	}
	yz.SamplerFree(g)
	return nil
}

// constraint is the grammar a request samples under: text (GBNF rooted at
// grammarRoot; "" none), from the first token on or, when trig is set,
// from where trig first fires in the output (toolcalls_lazy.go): the
// grammar then constrains the text from the trigger's marker on. stage is
// set per sequence (lazyStart): the empty chain, at the grammar's place in
// the sequence's chain, that the grammar joins when triggered; a lazy
// constraint without one is not applied.
type constraint struct {
	text  string
	trig  *lazyTrigger
	think reasoningAt // where the output's reasoning block stands (lazy only)
	stage yz.Sampler
}

// sampler returns the grammar sampler of c (from the first token on), 0
// when llama.cpp's parser refuses the grammar.
func (c constraint) sampler(vocab yz.Vocab) yz.Sampler {
	return yz.SamplerInitGrammar(vocab, c.text, grammarRoot)
}
