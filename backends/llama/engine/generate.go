package engine

import (
	"context"
	"maps"
	"slices"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/toolcall"
)

// Generate starts a generation and returns its event stream. Errors found
// before it starts come back directly: ErrInvalidRequest, a
// *ContextLengthError, ErrBusy, ErrClosed, or ctx's error. The stream ends
// with one event with Done set, then is closed; the caller must read it to
// the end (after cancelling ctx, the end comes within one decode step).
// MaxTokens 0 means what is left of the context. With N > 1 the choices'
// events interleave (Event.Index), each choice ends with its own Done event
// and the stream closes after the last; n above the model's slots is a
// *backends.BadRequestError on n.
func (m *Model) Generate(ctx context.Context, req Request) (<-chan Event, error) {
	images := backends.CountImages(req.Messages) > 0 || backends.PromptImageTokens(req.Prompt) > 0
	budget, err := validate(&req, m.nVocab, m.info.ContextSize, images)
	if err != nil {
		return nil, err
	}
	if err := checkChoices(&req, m.info.Slots); err != nil {
		return nil, err
	}
	if images && req.N > 1 {
		return nil, &backends.BadRequestError{Param: "n", Message: "a request with images generates one choice (n 1)"}
	}
	grammar, err := m.constraint(&req)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	media, err := m.newMediaPrompt(req.Prompt, req.Messages)
	if err != nil {
		return nil, err
	}
	prompt := make([]yz.Token, len(req.Prompt))
	for i, t := range req.Prompt {
		prompt[i] = yz.Token(t)
	}
	samp := req.Sampling
	samp.LogitBias = maps.Clone(req.Sampling.LogitBias)
	if samp.Seed != nil {
		seed := *samp.Seed
		samp.Seed = &seed
	}
	r := &request{
		ctx: ctx, prompt: prompt, budget: budget, stops: slices.Clone(req.Stop),
		samp: samp, grammar: grammar, stream: newStream(),
		logprobs: wantsLogprobs(&req), top: req.TopLogprobs, speculative: req.Speculative,
	}
	tools := wantsToolCalls(&req)
	thinks := len(req.Messages) > 0 && thinksTemplate(m.info.ChatTemplate) // chat only: a raw completion keeps its text
	inside := thinks && m.promptOpensThink(req.Prompt)
	if tools || thinks { // the markers may be control tokens: render them as text
		r.render = func(t yz.Token) string { return m.piece(t, true) }
	}
	if media != nil {
		// Its KV is never reused, and lookup drafts from the prompt's tokens.
		off := false
		r.media, r.speculative = media, &off
	}
	r.withChoices(req.N)
	if err := m.sch.submit(r); err != nil {
		media.release()
		return nil, err
	}
	var outs []<-chan Event
	for _, c := range r.group() {
		go c.stream.pump()
		outs = append(outs, outputEvents(c.stream.out, m.info.ChatTemplate, thinks, inside, tools))
	}
	if len(outs) == 1 {
		return outs[0], nil
	}
	return mergeChoices(outs), nil
}

// outputEvents turns a generation's events into what the caller reads: the
// thinking block of a reasoning template split off first (reasoningEvents),
// then tool calls parsed out of the content when the request reads them.
func outputEvents(in <-chan Event, tmpl string, thinks, inside, tools bool) <-chan Event {
	if thinks {
		in = reasoningEvents(in, inside)
	}
	if tools {
		in = toolEvents(in, toolcall.Detect(tmpl))
	}
	return in
}

// promptOpensThink reports whether the prompt's last tokens, control
// tokens rendered, leave a thinking block open.
func (m *Model) promptOpensThink(prompt []int32) bool {
	tail, err := m.Detokenize(prompt[max(0, len(prompt)-16):], true)
	return err == nil && promptOpensThink(tail)
}
