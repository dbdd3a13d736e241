package engine

import (
	"strings"
	"unicode"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/toolcall"
)

// constraint returns the grammar req samples under, checked by llama.cpp's
// parser. With tools and the daemon's call grammar: under tool_choice
// required or a named function the whole output is one or more calls
// (exactly one when ToolChoice.Single, or in Llama 3's format) in the
// template family's syntax, after a reasoning block where the template
// thinks (thinkGrammar), whatever response_format says; under auto, with
// a free-text response format, the output is free until the family's call
// marker and valid calls from there to the end (a lazy grammar,
// toolcalls_lazy.go). Families without a call syntax here (see
// callGrammar) and auto with a structured response format leave the calls
// unconstrained; the response format's grammar, if any, applies then.
func (m *Model) constraint(req *Request) (constraint, error) {
	tc := req.ToolChoice
	forced := tc.Mode == backends.ToolChoiceRequired || tc.Mode == backends.ToolChoiceFunction
	if wantsToolCalls(req) && tc.Grammar != "" && (forced || req.ResponseFormat.IsText()) {
		think := ""
		if forced {
			think = m.thinkGrammar(req)
		}
		c, ok := callGrammar(toolcall.Detect(m.info.ChatTemplate), m.info.ChatTemplate, tc.Grammar, think, tc.Single, !forced)
		if ok && !forced {
			c.think = m.reasoningAt(req)
		}
		if ok {
			g := c.sampler(m.vocab)
			if g == 0 {
				return constraint{}, &backends.BadRequestError{Param: "tools", Message: "the tool-call grammar does not parse"}
			}
			yz.SamplerFree(g)
			return c, nil
		}
	}
	if err := checkGrammar(m.vocab, req.ResponseFormat); err != nil {
		return constraint{}, err
	}
	return constraint{text: req.ResponseFormat.Grammar}, nil
}

// callGrammar wraps call, the daemon's grammar of one call object rooted
// at grammarRoot (backends/llama/grammar.ToolCall: its first line the root
// rule, its parts named), in the call syntax of fam as tmpl writes it
// (callSyntax), after think (a GBNF expression over the rules of
// thinkRules: the reasoning block the calls may follow; "" none), lazily
// triggered by the family's markers when lazy. single allows exactly one
// call. false: fam has no call grammar here (or call is not the daemon's).
func callGrammar(fam toolcall.Family, tmpl, call, think string, single, lazy bool) (constraint, bool) {
	rest, ok := strings.CutPrefix(call, grammarRoot+" ::= ")
	if !ok {
		return constraint{}, false
	}
	body, keys, ok := callSyntax(fam, tmpl, toolCount(call), single, lazy)
	if !ok {
		return constraint{}, false
	}
	rules := "tool-call ::= " + rest
	for k, v := range keys {
		rules = setRule(rules, k, v)
	}
	if think != "" {
		body = think + " " + body
		rules += thinkRules
	}
	c := constraint{text: grammarRoot + " ::= " + body + "\n" + rules}
	if lazy {
		trig, err := newLazyTrigger(fam)
		if err != nil {
			return constraint{}, false
		}
		text, ok := lazyGrammar(c.text, trig)
		if !ok {
			return constraint{}, false
		}
		c.text, c.trig = text, trig
	}
	return c, true
}

// thinkRules define think-text, a reasoning block's text before a
// constrained call (up to 1,024 characters, no "</"), and think-ws, the
// whitespace after its end.
const thinkRules = "think-text ::= think-char{0,1024}\n" +
	`think-char ::= [^<] | "<" [^/]` + "\n" +
	`think-ws ::= [ \t\r\n]{0,4}` + "\n"

// reasoningAt says where a reasoning block stands at the start of the output.
type reasoningAt int

const (
	reasonNone    reasoningAt = iota // no block: the template does not think, or the prompt closed it
	reasonInside                     // the prompt opens the block: the output begins inside it
	reasonMayOpen                    // the output may begin with <think>
)

// reasoningAt is where req's output begins with respect to a reasoning
// block, for a chat request to a template that thinks: inside one when the
// prompt opens it (DeepSeek R1, QwQ), none when the prompt ends with a
// closed one (Qwen3 with enable_thinking false), else the output may open
// one (Qwen3).
func (m *Model) reasoningAt(req *Request) reasoningAt {
	if len(req.Messages) == 0 || !thinksTemplate(m.info.ChatTemplate) {
		return reasonNone
	}
	tail, err := m.Detokenize(req.Prompt[max(0, len(req.Prompt)-16):], true)
	switch {
	case err != nil:
		return reasonNone
	case promptOpensThink(tail):
		return reasonInside
	case strings.HasSuffix(strings.TrimRightFunc(tail, unicode.IsSpace), thinkClose):
		return reasonNone
	}
	return reasonMayOpen
}

// thinkGrammar is the reasoning block a call constrained from the start of
// the output may follow (reasoningAt), as a GBNF expression over
// thinkRules: the rest of the block and </think> when the output begins
// inside one, an optional <think>...</think> block when it may open one,
// "" for none. The block goes to reasoning_content (reasoningEvents), the
// calls after it to tool_calls.
func (m *Model) thinkGrammar(req *Request) string {
	switch m.reasoningAt(req) {
	case reasonInside:
		return `think-text "</think>" think-ws`
	case reasonMayOpen:
		return `("<think>" think-text "</think>" think-ws)?`
	}
	return ""
}

// wantsToolCalls reports whether r's output is read for tool calls: it
// offers tools and does not forbid calling them.
func wantsToolCalls(r *Request) bool {
	return len(r.Tools) > 0 && r.ToolChoice.Mode != backends.ToolChoiceNone
}

// toolEvents turns the events of a generation into content and tool-call
// events: the text of every event goes through the family's stream parser
// (fam's markers arrive as text, control tokens rendered), each event
// carries the content and the tool-call deltas its text released, and the
// final event says FinishToolCalls when the output held calls and ended at
// end of generation. A malformed call ends the parse (toolcall's rules: the
// text after it is dropped); an output cut inside a call (FinishLength)
// keeps its reason with the part of the call generated. The channel it
// returns closes after the final event, as in does.
func toolEvents(in <-chan Event, fam toolcall.Family) <-chan Event {
	out := make(chan Event)
	go func() {
		defer close(out)
		st, err := toolcall.NewStream(fam, nil)
		calls := 0
		for ev := range in {
			if err != nil { // no parser for fam: the text passes as it is
				out <- ev
				continue
			}
			text, deltas, _ := st.Feed(ev.Text)
			if ev.Done {
				rest, more, _ := st.Close()
				text += rest
				deltas = append(deltas, more...)
			}
			for _, d := range deltas {
				if d.ID != "" {
					calls++
				}
			}
			ev.Text, ev.ToolCalls = text, deltas
			if ev.Done && calls > 0 && ev.Finish == backends.FinishStop {
				ev.Finish = backends.FinishToolCalls
			}
			out <- ev
		}
	}()
	return out
}
