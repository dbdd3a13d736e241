package engine

import (
	"strings"
	"unicode"
)

// The thinking block of reasoning models (DeepSeek R1 and its distills,
// Qwen3, QwQ): the model writes its reasoning between these markers before
// the answer.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinksTemplate reports whether a chat template is a reasoning model's: it
// handles a <think> block (its own markup or the enable_thinking switch).
func thinksTemplate(src string) bool {
	return strings.Contains(src, thinkOpen) || strings.Contains(src, "enable_thinking")
}

// promptOpensThink reports whether a rendered prompt ends inside a thinking
// block: its last <think> comes after its last </think> (DeepSeek R1
// distills end the generation prompt with "<think>\n", so the output
// begins with the reasoning; Qwen3 with enable_thinking false ends it with
// an empty block, so the output is the answer).
func promptOpensThink(tail string) bool {
	open := strings.LastIndex(tail, thinkOpen)
	return open >= 0 && open > strings.LastIndex(tail, thinkClose)
}

// thinkState is where a thinkSplitter is in the output.
type thinkState int

const (
	thinkStart   thinkState = iota // before anything but whitespace: a <think> may open
	thinkInside                    // in the thinking block
	thinkContent                   // the answer
)

// thinkSplitter splits a stream of generated text into reasoning (the
// thinking block) and content. Text that could be the start of a marker
// split across tokens is held until the next piece decides it; the
// reasoning's leading and trailing whitespace and the whitespace between
// </think> and the answer are dropped. The content is what the text holds
// outside the block, so a later parser (tool calls) reads it as it would
// a model without reasoning.
type thinkSplitter struct {
	state thinkState
	held  string // undecided text: a partial marker, or whitespace
	lead  bool   // the current part has shown only whitespace so far
}

// newThinkSplitter starts a splitter; inside says the prompt opened the
// thinking block.
func newThinkSplitter(inside bool) *thinkSplitter {
	if inside {
		return &thinkSplitter{state: thinkInside, lead: true}
	}
	return &thinkSplitter{state: thinkStart}
}

// Feed takes the next piece of text and returns the content and reasoning
// it releases.
func (s *thinkSplitter) Feed(text string) (content, reasoning string) {
	buf := s.held + text
	s.held = ""
	var c, r strings.Builder
	for buf != "" {
		switch s.state {
		case thinkStart:
			trimmed := strings.TrimLeftFunc(buf, unicode.IsSpace)
			switch {
			case strings.HasPrefix(trimmed, thinkOpen):
				s.state, s.lead = thinkInside, true
				buf = trimmed[len(thinkOpen):]
			case strings.HasPrefix(thinkOpen, trimmed):
				s.held = buf // whitespace or a partial <think>
				return c.String(), r.String()
			default:
				s.state = thinkContent
			}
		case thinkInside:
			if s.lead {
				buf = strings.TrimLeftFunc(buf, unicode.IsSpace)
				if buf == "" {
					return c.String(), r.String()
				}
				s.lead = false
			}
			if i := strings.Index(buf, thinkClose); i >= 0 {
				r.WriteString(strings.TrimRightFunc(buf[:i], unicode.IsSpace))
				s.state, s.lead = thinkContent, true
				buf = buf[i+len(thinkClose):]
				continue
			}
			// Hold a tail that may begin </think>, and trailing whitespace
			// (dropped if </think> follows).
			keep := partialSuffix(buf, thinkClose)
			body := buf[:len(buf)-keep]
			trimmed := strings.TrimRightFunc(body, unicode.IsSpace)
			r.WriteString(trimmed)
			s.held = buf[len(trimmed):]
			return c.String(), r.String()
		case thinkContent:
			if s.lead {
				buf = strings.TrimLeftFunc(buf, unicode.IsSpace)
				if buf == "" {
					return c.String(), r.String()
				}
				s.lead = false
			}
			c.WriteString(buf)
			buf = ""
		}
	}
	return c.String(), r.String()
}

// Close ends the text: what is held is released (an unclosed thinking
// block, as when the output was cut by max_tokens, stays reasoning).
func (s *thinkSplitter) Close() (content, reasoning string) {
	held := s.held
	s.held = ""
	switch s.state {
	case thinkInside:
		return "", strings.TrimRightFunc(held, unicode.IsSpace)
	case thinkStart:
		return held, ""
	}
	return "", ""
}

// partialSuffix is the length of the longest proper prefix of marker that
// text ends with.
func partialSuffix(text, marker string) int {
	for n := min(len(marker)-1, len(text)); n > 0; n-- {
		if strings.HasSuffix(text, marker[:n]) {
			return n
		}
	}
	return 0
}

// reasoningEvents moves the thinking block of a generation's text into the
// events' Reasoning; the rest stays Text. It runs before tool-call parsing,
// so a call written while thinking is no call. The final event's usage
// counts the reasoning tokens: each token sampled inside the block, or that
// opened or closed it (a token whose text is held counts by where the
// splitter is). The channel it returns closes after the final event, as in
// does.
func reasoningEvents(in <-chan Event, inside bool) <-chan Event {
	out := make(chan Event)
	go func() {
		defer close(out)
		sp := newThinkSplitter(inside)
		tokens := 0
		for ev := range in {
			before := sp.state == thinkInside
			content, reasoning := sp.Feed(ev.Text)
			if !ev.Done && (before || sp.state == thinkInside || reasoning != "") {
				tokens++
			}
			if ev.Done {
				c, r := sp.Close()
				content += c
				reasoning += r
				ev.Usage.ReasoningTokens = min(tokens, ev.Usage.CompletionTokens)
			}
			ev.Text, ev.Reasoning = content, ev.Reasoning+reasoning
			out <- ev
		}
	}()
	return out
}
