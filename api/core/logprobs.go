package core

import (
	"fmt"
	"strings"

	"github.com/modeld/modeld/backends"
)

// The wire shapes of logprobs and of n > 1 choices (OpenAI's): a chat
// choice's logprobs.content lists each generated token with its
// log-probability, its bytes and its top alternatives; a text completion's
// logprobs holds parallel lists (tokens, token_logprobs, top_logprobs as
// token-to-logprob maps, text_offset). The backend's events carry the
// numbers (backends.Event.Logprobs) and the choice (Event.Index).

// ChatLogprobs is a chat choice's logprobs.
type ChatLogprobs struct {
	Content []ChatTokenLogprob `json:"content"`
	Refusal []ChatTokenLogprob `json:"refusal"`
}

// TopLogprob is one alternative at a token's position.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// ChatTokenLogprob is one generated token of a chat choice.
type ChatTokenLogprob struct {
	TopLogprob
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// CompletionLogprobs is a text completion choice's logprobs. TextOffset is
// each token's byte offset in the choice's text (as the token pieces join).
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

func topLogprob(t backends.TokenLogprob) TopLogprob {
	b := make([]int, len(t.Bytes))
	for i, c := range t.Bytes {
		b[i] = int(c)
	}
	return TopLogprob{Token: string(t.Bytes), Logprob: float64(t.Logprob), Bytes: b}
}

// ChatTokenLogprobs is the chat wire form of tokens' logprobs.
func ChatTokenLogprobs(lps []*backends.Logprobs) []ChatTokenLogprob {
	out := make([]ChatTokenLogprob, 0, len(lps))
	for _, lp := range lps {
		w := ChatTokenLogprob{TopLogprob: topLogprob(lp.TokenLogprob), TopLogprobs: []TopLogprob{}}
		for _, alt := range lp.Top {
			w.TopLogprobs = append(w.TopLogprobs, topLogprob(alt))
		}
		out = append(out, w)
	}
	return out
}

// NewCompletionLogprobs is the completions wire form of tokens' logprobs;
// offset is the text offset of the first of them. With top 0 the
// top_logprobs entries are null, as OpenAI gives them for logprobs 0.
func NewCompletionLogprobs(lps []*backends.Logprobs, offset int, top int) *CompletionLogprobs {
	out := &CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for _, lp := range lps {
		out.Tokens = append(out.Tokens, string(lp.Bytes))
		out.TokenLogprobs = append(out.TokenLogprobs, float64(lp.Logprob))
		out.TextOffset = append(out.TextOffset, offset)
		offset += len(lp.Bytes)
		var alts map[string]float64
		if top > 0 {
			alts = make(map[string]float64, len(lp.Top))
			for _, alt := range lp.Top {
				if _, dup := alts[string(alt.Bytes)]; !dup { // two tokens may render alike
					alts[string(alt.Bytes)] = float64(alt.Logprob)
				}
			}
		}
		out.TopLogprobs = append(out.TopLogprobs, alts)
	}
	return out
}

// ChoiceResult is one choice of a whole generation.
type ChoiceResult struct {
	chatResult
	Logprobs []*backends.Logprobs
}

// SumUsage adds a choice's usage to the generation's: the prompt is
// counted once (every choice shares it), completion tokens add up.
func SumUsage(total *backends.Usage, u backends.Usage) {
	total.PromptTokens = max(total.PromptTokens, u.PromptTokens)
	total.CachedTokens = max(total.CachedTokens, u.CachedTokens)
	total.CompletionTokens += u.CompletionTokens
}

// CollectChoices reads a generation of n choices (n >= 1) to its end: each
// choice's text, reasoning, tool calls, logprobs and finish reason, and the
// usage summed as SumUsage does. A failed choice fails the whole; a cut
// one is ErrCut.
func CollectChoices(events <-chan backends.Event, n int) ([]ChoiceResult, backends.Usage, error) {
	type acc struct {
		text, reasoning strings.Builder
		calls           []WireToolCall
		lps             []*backends.Logprobs
		last            backends.Event
		done            bool
	}
	accs := make([]acc, n)
	var usage backends.Usage
	var failed, cut error
	for ev := range events {
		if ev.Index < 0 || ev.Index >= n {
			failed = firstErr(failed, fmt.Errorf("generation failed: an event of choice %d in a request of %d", ev.Index, n))
			continue
		}
		a := &accs[ev.Index]
		a.text.WriteString(ev.Text)
		a.reasoning.WriteString(ev.Reasoning)
		a.calls = AddToolDeltas(a.calls, ev.ToolCalls)
		if ev.Logprobs != nil {
			a.lps = append(a.lps, ev.Logprobs)
		}
		if !ev.Done {
			continue
		}
		a.last, a.done = ev, true
		SumUsage(&usage, ev.Usage)
		switch {
		case GenerationError(ev) != nil:
			failed = firstErr(failed, GenerationError(ev))
		case ev.Finish == backends.FinishCancelled:
			cut = ErrCut
		}
	}
	if failed != nil {
		return nil, usage, failed
	}
	if cut != nil {
		return nil, usage, cut
	}
	out := make([]ChoiceResult, n)
	for i := range accs {
		a := &accs[i]
		if !a.done {
			return nil, usage, fmt.Errorf("generation failed: choice %d ended without its final event", i)
		}
		r := ChoiceResult{chatResult: chatResult{Text: a.text.String(), Reasoning: a.reasoning.String(), Finish: a.last.Finish, Stop: a.last.Stop, Usage: a.last.Usage}, Logprobs: a.lps}
		for _, tc := range a.calls {
			r.ToolCalls = append(r.ToolCalls, backends.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		out[i] = r
	}
	return out, usage, nil
}

// firstErr keeps the first error.
func firstErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// CompletionLogprobsParam reads the completions API's legacy logprobs, an
// integer: that many alternatives per token (0: the tokens' own only). It
// rewrites f into the chat form (logprobs true, top_logprobs k); true and
// false pass as they are.
func (f *SamplingFields) CompletionLogprobsParam() error {
	raw := strings.TrimSpace(string(f.Logprobs))
	switch raw {
	case "", "null", "true", "false":
		return nil
	}
	f.Logprobs = nil // reported here, not again by request
	var k int
	if _, err := fmt.Sscan(raw, &k); err != nil || fmt.Sprint(k) != raw {
		return BadRequest("logprobs", "logprobs must be an integer in [0, %d] (or true or false)", MaxTopLogprobs)
	}
	if k < 0 || k > MaxTopLogprobs {
		return BadRequest("logprobs", "logprobs %d is outside [0, %d]", k, MaxTopLogprobs)
	}
	f.Logprobs = []byte("true")
	f.TopLogprobs = &k
	return nil
}
