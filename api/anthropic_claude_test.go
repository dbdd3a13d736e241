package api

import (
	"strings"
	"testing"

	"github.com/modeld/modeld/api/anthropic"
	"github.com/modeld/modeld/backends"
)

// Requests shaped as Claude Code sends them to a model id it does not know:
// its environment block as a system message inside messages, its
// attribution line first in system, thinking absent.

// claudeCodeBody is a Claude Code request of session hash (the three hex
// digits its attribution line changes with) and turns extra messages after
// the first user turn and the environment block.
func claudeCodeBody(hash, extra string) string {
	return `{"model":"claude-test","max_tokens":32000,"stream":false,
		"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.328.` + hash + `; cc_entrypoint=sdk-cli; cch=00000;"},
			{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}}],
		"messages":[{"role":"user","content":[{"type":"text","text":"say hi"}]},
			{"role":"system","content":[{"type":"text","text":"# Environment\nWorking directory: /w","cache_control":{"type":"ephemeral"}}]}` + extra + `],
		"metadata":{"user_id":"u"},"context_management":{"edits":[]},"output_config":{"effort":"high"}}`
}

// TestAnthropicSystemMessage: a system message in messages (blocks with
// cache_control, or a string) is a system message where it stands, not a
// 400; the attribution line is dropped from system (and a system message
// that held it alone goes); thinking absent is enable_thinking false.
func TestAnthropicSystemMessage(t *testing.T) {
	m := &anthropicFake{script: []backends.Event{atext("hi"), adone(backends.FinishStop, 1)}, got: make(chan backends.Request, 1),
		vars: make(chan map[string]any, 1)}
	s := anthropicServer(t, m)
	w := postAnthropic(t, s, "/v1/messages?beta=true", claudeCodeBody("a3f",
		`,{"role":"assistant","content":"hello"},{"role":"system","content":"be terse"},{"role":"system","content":"x-anthropic-billing-header: cc_version=1;"},{"role":"user","content":"again"}`))
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	req := <-m.got
	var roles []string
	for _, msg := range req.Messages {
		roles = append(roles, msg.Role+":"+msg.Content)
	}
	want := []string{"system:You are Claude Code.", "user:say hi", "system:# Environment\nWorking directory: /w",
		"assistant:hello", "system:be terse", "user:again"}
	if strings.Join(roles, "|") != strings.Join(want, "|") {
		t.Errorf("messages\n got %q\nwant %q", roles, want)
	}
	if v := <-m.vars; v["enable_thinking"] != false {
		t.Errorf("thinking absent: template vars %v, want enable_thinking false", v)
	}
}

// TestAnthropicBillingHeader: two sessions whose requests differ only in the
// attribution line get the same prompt; with KeepBillingHeader the line is
// the system prompt's first, verbatim.
func TestAnthropicBillingHeader(t *testing.T) {
	prompt := func(opt Options, hash string) []int32 {
		m := &anthropicFake{script: []backends.Event{adone(backends.FinishStop, 1)}, got: make(chan backends.Request, 1)}
		s := anthropicServerWith(t, m, opt)
		if w := postAnthropic(t, s, "/v1/messages?beta=true", claudeCodeBody(hash, "")); w.Code != 200 {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		req := <-m.got
		if opt.KeepBillingHeader {
			if line := "x-anthropic-billing-header: cc_version=2.1.328." + hash + "; cc_entrypoint=sdk-cli; cch=00000;"; req.Messages[0].Content != line+"\n\nYou are Claude Code." {
				t.Errorf("kept: system %q", req.Messages[0].Content)
			}
		} else if req.Messages[0].Content != "You are Claude Code." {
			t.Errorf("dropped: system %q", req.Messages[0].Content)
		}
		return req.Prompt
	}
	a, b := prompt(Options{}, "a3f"), prompt(Options{}, "09c")
	if len(a) == 0 || string(backendsTokens(a)) != string(backendsTokens(b)) {
		t.Errorf("sessions a3f and 09c got different prompts:\n%q\n%q", backendsTokens(a), backendsTokens(b))
	}
	ka, kb := prompt(Options{KeepBillingHeader: true}, "a3f"), prompt(Options{KeepBillingHeader: true}, "09c")
	if string(backendsTokens(ka)) == string(backendsTokens(kb)) {
		t.Error("kept: the two sessions' prompts are the same")
	}
}

// backendsTokens is a byte tokenizer's prompt as text.
func backendsTokens(ids []int32) []byte {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return b
}

// TestDropBillingHeader: only a leading attribution line goes; text after
// it in the same block stays.
func TestDropBillingHeader(t *testing.T) {
	for in, want := range map[string]string{
		"x-anthropic-billing-header: cc_version=2.1.328.a3f;":        "",
		"  x-anthropic-billing-header: a;\nYou are Claude Code.":     "You are Claude Code.",
		"You are Claude Code.\nx-anthropic-billing-header: a;":       "You are Claude Code.\nx-anthropic-billing-header: a;",
		"X-Anthropic-Billing-Header is a header Claude Code sends":   "X-Anthropic-Billing-Header is a header Claude Code sends",
		"x-anthropic-billing-header: cc_version=1;\r\n\r\nBe brief.": "Be brief.",
	} {
		if got := anthropic.DropBillingHeader(in); got != want {
			t.Errorf("dropBillingHeader(%q) = %q, want %q", in, got, want)
		}
	}
}
