package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modeld/modeld/api/anthropic"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/models"
)

// The Messages dialect's wire shapes, from the examples of Anthropic's API
// reference (messages, streaming, tool use, extended thinking, count
// tokens, errors), against a fake chat model with a byte tokenizer.

// anthropicFake is a chat model whose every generation is script (the
// final event gets the prompt's length as its usage); it tokenizes bytes
// and renders "<role>content" per message, tool calls included.
type anthropicFake struct {
	byteTokenizer
	script []backends.Event
	cached int
	got    chan backends.Request
	vars   chan map[string]any
}

func (f *anthropicFake) Close() error        { return nil }
func (f *anthropicFake) Size() int64         { return 1 }
func (f *anthropicFake) Slots() int          { return 2 }
func (f *anthropicFake) Info() backends.Info { return backends.Info{ContextSize: 4096} }
func (f *anthropicFake) ApplyChatTemplateContext(ctx context.Context, msgs []backends.Message, _ bool) (string, error) {
	if f.vars != nil {
		f.vars <- backends.TemplateVars(ctx)
	}
	var sb strings.Builder
	for _, m := range msgs {
		sb.WriteString("<" + m.Role + ">" + m.Content)
		for _, tc := range m.ToolCalls {
			sb.WriteString("[" + tc.Name + tc.Arguments + "]")
		}
	}
	return sb.String(), nil
}
func (f *anthropicFake) Generate(_ context.Context, req backends.Request) (<-chan backends.Event, error) {
	if f.got != nil {
		f.got <- req
	}
	ch := make(chan backends.Event, len(f.script))
	for _, ev := range f.script {
		if ev.Done {
			ev.Usage.PromptTokens, ev.Usage.CachedTokens = len(req.Prompt), f.cached
		}
		ch <- ev
	}
	close(ch)
	return ch, nil
}

// anthropicServer serves the model "claude-test" (any other id is not in
// the store).
func anthropicServer(t *testing.T, m *anthropicFake) *Server {
	t.Helper()
	return anthropicServerKey(t, m, "")
}

// anthropicServerKey is anthropicServer requiring the API key key.
func anthropicServerKey(t *testing.T, m *anthropicFake, key string) *Server {
	t.Helper()
	return anthropicServerWith(t, m, Options{APIKey: key})
}

// anthropicServerWith is anthropicServer with more options.
func anthropicServerWith(t *testing.T, m *anthropicFake, opt Options) *Server {
	t.Helper()
	resolve := func(_ context.Context, id string) (cache.Spec, error) {
		if id != "claude-test" {
			return cache.Spec{}, fmt.Errorf("%w: %s", models.ErrNotFound, id)
		}
		return cache.Spec{ID: id, Task: "chat"}, nil
	}
	load := func(context.Context, cache.Spec) (cache.Instance, error) { return m, nil }
	c, err := cache.New(cache.DefaultConfig(), resolve, load)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	opt.Version, opt.Libs, opt.Cache, opt.Constraints = "test", backendsLibs(t), c, testConstraints
	return New(opt)
}

func postAnthropic(t *testing.T, s *Server, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("POST", "http://localhost"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("anthropic-beta", "interleaved-thinking-2025-05-14")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	return w
}

func anthropicBody[T any](t *testing.T, w *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("body %s: %v", w.Body, err)
	}
	return v
}

func atext(s string) backends.Event { return backends.Event{Token: 1, Text: s} }

func adone(f backends.FinishReason, completion int) backends.Event {
	return backends.Event{Token: -1, Done: true, Finish: f, Usage: backends.Usage{CompletionTokens: completion}}
}

// TestAnthropicMessage: the reference's first example (system prompt, one
// user turn) answers a message of the documented shape; the sampling
// fields and max_tokens reach the generation; usage splits the prompt into
// input_tokens and cache_read_input_tokens.
func TestAnthropicMessage(t *testing.T) {
	m := &anthropicFake{script: []backends.Event{atext("Hi! My name is "), atext("Claude."), adone(backends.FinishStop, 3)},
		cached: 4, got: make(chan backends.Request, 1)}
	s := anthropicServer(t, m)
	w := postAnthropic(t, s, "/v1/messages", `{"model":"claude-test","max_tokens":1024,"system":"You are a helpful assistant.",
		"messages":[{"role":"user","content":"Hello, Claude"}],"temperature":0.5,"top_p":0.9,"top_k":40,"stop_sequences":["\n\nHuman:"],
		"metadata":{"user_id":"u-1"}}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	prompt := len("<system>You are a helpful assistant.<user>Hello, Claude")
	want := map[string]any{"type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "end_turn", "stop_sequence": nil,
		"content": []any{map[string]any{"type": "text", "text": "Hi! My name is Claude."}},
		"usage": map[string]any{"input_tokens": float64(prompt - 4), "output_tokens": float64(3), "cache_read_input_tokens": float64(4),
			"cache_creation_input_tokens": float64(0)}}
	id, _ := got["id"].(string)
	if !strings.HasPrefix(id, "msg_") {
		t.Errorf("id %q", id)
	}
	delete(got, "id")
	if g, w := anthropicJSON(t, got), anthropicJSON(t, want); g != w {
		t.Errorf("message\n got %s\nwant %s", g, w)
	}
	req := <-m.got
	if req.MaxTokens != 1024 || req.Sampling.Temperature != 0.5 || req.Sampling.TopP != 0.9 || req.Sampling.TopK != 40 ||
		len(req.Stop) != 1 || req.Stop[0] != "\n\nHuman:" || len(req.Messages) != 2 || req.Messages[0].Role != "system" ||
		len(req.Prompt) != prompt {
		t.Errorf("the generation got %+v", req)
	}
}

func anthropicJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// anthropicError is the error body of the reference's "Errors" page.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestAnthropicRefusals: what the dialect refuses is a 400 (404 for an
// unknown model) in Anthropic's error shape, naming the field.
func TestAnthropicRefusals(t *testing.T) {
	s := anthropicServer(t, &anthropicFake{script: []backends.Event{adone(backends.FinishStop, 1)}})
	user := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, body string
		status     int
		typ, says  string
	}{
		{"no max_tokens", `{"model":"claude-test",` + user + `}`, 400, "invalid_request_error", "max_tokens is required"},
		{"unknown model", `{"model":"claude-nope","max_tokens":5,` + user + `}`, 404, "not_found_error", "claude-nope"},
		{"web search", `{"model":"claude-test","max_tokens":5,` + user + `,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]}`,
			400, "invalid_request_error", `tools[0] is Anthropic's built-in tool "web_search_20250305"`},
		{"bash", `{"model":"claude-test","max_tokens":5,` + user + `,"tools":[{"type":"bash_20250124","name":"bash"}]}`,
			400, "invalid_request_error", `"bash_20250124"`},
		{"image", `{"model":"claude-test","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4AAQ"}},{"type":"text","text":"What is in this image?"}]}]}`,
			400, "invalid_request_error", "image 0: the jpeg image is truncated or corrupt"},
		{"document in a tool result", `{"model":"claude-test","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"document","source":{}}]}]}]}`,
			400, "invalid_request_error", `messages[2].content[0].content[0] has type "document"; a tool result holds text and images`},
		{"temperature", `{"model":"claude-test","max_tokens":5,"temperature":1.5,` + user + `}`, 400, "invalid_request_error", "temperature 1.5 is outside [0, 1]"},
		{"developer role", `{"model":"claude-test","max_tokens":5,"messages":[{"role":"developer","content":"x"}]}`, 400, "invalid_request_error", `messages[0].role "developer" is not one of user, assistant, system`},
		{"system message of an image", `{"model":"claude-test","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"system","content":[{"type":"image"}]}]}`,
			400, "invalid_request_error", "messages[1].content[0] has type \"image\"; system blocks must be text"},
		{"prefill", `{"model":"claude-test","max_tokens":5,` + user[:len(user)-1] + `,{"role":"assistant","content":"The answer is"}]}`,
			400, "invalid_request_error", "prefill"},
		{"tool_choice any without tools", `{"model":"claude-test","max_tokens":5,"tool_choice":{"type":"any"},` + user + `}`, 400, "invalid_request_error", "needs tools"},
		{"tool_choice type", `{"model":"claude-test","max_tokens":5,"tool_choice":{"type":"function"},` + user + `}`, 400, "invalid_request_error", "tool_choice.type"},
		{"no input_schema", `{"model":"claude-test","max_tokens":5,"tools":[{"name":"f"}],` + user + `}`, 400, "invalid_request_error", "tools[0].input_schema"},
		{"mcp servers", `{"model":"claude-test","max_tokens":5,"mcp_servers":[{"type":"url","url":"https://example.com/sse","name":"x"}],` + user + `}`, 400, "invalid_request_error", "mcp_servers"},
		{"thinking type", `{"model":"claude-test","max_tokens":5,"thinking":{"type":"on"},` + user + `}`, 400, "invalid_request_error", "thinking.type"},
		{"not json", `{"model":`, 400, "invalid_request_error", "not valid JSON"},
		{"empty stop sequence", `{"model":"claude-test","max_tokens":5,"stop_sequences":[""],` + user + `}`, 400, "invalid_request_error", "stop_sequences[0] must be"},
	} {
		w := postAnthropic(t, s, "/v1/messages", tc.body)
		e := anthropicBody[anthropicError](t, w)
		if w.Code != tc.status || e.Type != "error" || e.Error.Type != tc.typ || !strings.Contains(e.Error.Message, tc.says) {
			t.Errorf("%s: %d %s; want %d %s saying %q", tc.name, w.Code, w.Body, tc.status, tc.typ, tc.says)
		}
	}
}

// TestAnthropicAgentFields: a request shaped as Claude Code sends it
// (?beta=true; metadata, context_management, output_config with effort,
// cache_control on blocks, thinking, a system of blocks) is answered; the
// fields modeld does not use change nothing, and thinking reaches the
// template as enable_thinking. max_tokens 32000 is a ceiling: over what
// the model's context leaves, the context bounds the completion.
func TestAnthropicAgentFields(t *testing.T) {
	m := &anthropicFake{script: []backends.Event{atext("ok"), adone(backends.FinishStop, 2)}, got: make(chan backends.Request, 1),
		vars: make(chan map[string]any, 1)}
	var logs syncBuffer
	s := anthropicServerWith(t, m, Options{Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	w := postAnthropic(t, s, "/v1/messages?beta=true", `{"model":"claude-test","max_tokens":32000,
		"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Be brief."}],
		"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}],
		"tools":[{"name":"Read","description":"Read a file","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]},"cache_control":{"type":"ephemeral"}}],
		"metadata":{"user_id":"user_abc"},"thinking":{"type":"enabled","budget_tokens":31999},
		"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},"output_config":{"effort":"high"},"stream":false}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	req := <-m.got
	if len(req.Messages) != 2 || req.Messages[0].Content != "You are Claude Code.\n\nBe brief." || len(req.Tools) != 1 ||
		req.Messages[1].Content != "<system-reminder>x</system-reminder>\n\nhi" ||
		req.Tools[0].Name != "Read" || !req.ResponseFormat.IsText() || req.ToolChoice.Mode != "" || req.MaxTokens != 0 {
		t.Errorf("the generation got %+v", req)
	}
	if v := <-m.vars; v["enable_thinking"] != true {
		t.Errorf("template vars %v, want enable_thinking true", v)
	}
	if l := logs.String(); !strings.Contains(l, "fields ignored") || !strings.Contains(l, "context_management metadata") {
		t.Errorf("the ignored fields are not logged at debug:\n%s", l)
	}
	_ = postAnthropic(t, s, "/v1/messages", `{"model":"claude-test","max_tokens":5,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"}]}`)
	<-m.got
	if v := <-m.vars; v["enable_thinking"] != false {
		t.Errorf("template vars %v, want enable_thinking false", v)
	}
}

// TestAnthropicToolRoundTrip: the tool-use guide's conversation (a
// tool_use turn and its tool_result, here an error) becomes the
// assistant's tool call and a tool message; tool_choice tool names the
// function, disable_parallel_tool_use asks for one call; the model's call
// answers as a tool_use block with a toolu_ id and its input an object.
func TestAnthropicToolRoundTrip(t *testing.T) {
	args := `{"location": "San Francisco, CA", "unit": "celsius"}`
	m := &anthropicFake{got: make(chan backends.Request, 1), script: []backends.Event{
		{Token: 1, ToolCalls: []backends.ToolCallDelta{{Index: 0, ID: "call_abc", Name: "get_weather", Arguments: args[:10]}}},
		{Token: 2, ToolCalls: []backends.ToolCallDelta{{Index: 0, Arguments: args[10:]}}},
		adone(backends.FinishToolCalls, 9)}}
	s := anthropicServer(t, m)
	body := `{"model":"claude-test","max_tokens":1024,
		"tools":[{"name":"get_weather","description":"Get the current weather in a given location",
			"input_schema":{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},
			"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}}],
		"tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true},
		"messages":[{"role":"user","content":"What is the weather like in San Francisco?"},
			{"role":"assistant","content":[{"type":"text","text":"I'll check."},{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"location":"San Francisco, CA"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A09q90qw90lq917835lq9","content":[{"type":"text","text":"ConnectionError: the weather service API is not available (HTTP 500)"}],"is_error":true},
				{"type":"text","text":"Try again"}]}]}`
	w := postAnthropic(t, s, "/v1/messages", body)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	resp := anthropicBody[anthropic.AnthropicResponse](t, w)
	if *resp.StopReason != "tool_use" || len(resp.Content) != 1 || resp.Content[0].Type != "tool_use" || resp.Content[0].ID != "toolu_abc" ||
		resp.Content[0].Name != "get_weather" || string(resp.Content[0].Input) != `{"location":"San Francisco, CA","unit":"celsius"}` {
		t.Errorf("answer %s", w.Body)
	}
	req := <-m.got
	wantMsgs := []backends.Message{
		{Role: "user", Content: "What is the weather like in San Francisco?"},
		{Role: "assistant", Content: "I'll check.", ToolCalls: []backends.ToolCall{{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: `{"location":"San Francisco, CA"}`}}},
		{Role: "tool", ToolCallID: "toolu_01A09q90qw90lq917835lq9", Content: "Error: ConnectionError: the weather service API is not available (HTTP 500)"},
		{Role: "user", Content: "Try again"},
	}
	for i := range req.Messages {
		req.Messages[i].Parts = nil
	}
	if g, w := anthropicJSON(t, req.Messages), anthropicJSON(t, wantMsgs); g != w {
		t.Errorf("messages\n got %s\nwant %s", g, w)
	}
	if req.ToolChoice.Mode != backends.ToolChoiceFunction || req.ToolChoice.Name != "get_weather" || !req.ToolChoice.Single {
		t.Errorf("tool choice %+v", req.ToolChoice)
	}

	// any is required, none drops the tools.
	for choice, want := range map[string]backends.ToolChoiceMode{"any": backends.ToolChoiceRequired, "auto": backends.ToolChoiceAuto, "none": backends.ToolChoiceNone} {
		b := strings.Replace(body, `{"type":"tool","name":"get_weather","disable_parallel_tool_use":true}`, `{"type":"`+choice+`"}`, 1)
		if w := postAnthropic(t, s, "/v1/messages", b); w.Code != 200 {
			t.Fatalf("%s: %d %s", choice, w.Code, w.Body)
		}
		req := <-m.got
		if req.ToolChoice.Mode != want || (choice == "none") != (len(req.Tools) == 0) || req.ToolChoice.Single {
			t.Errorf("tool_choice %s: %+v, %d tools", choice, req.ToolChoice, len(req.Tools))
		}
	}
}

// anthropicEvent is one event of an Anthropic stream.
type anthropicEvent struct {
	name string
	data map[string]any
}

func readAnthropicSSE(t *testing.T, body string) []anthropicEvent {
	t.Helper()
	var out []anthropicEvent
	var name string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("data %q: %v", line, err)
			}
			if d["type"] != name {
				t.Errorf("event %s carries type %v", name, d["type"])
			}
			out = append(out, anthropicEvent{name, d})
		case line != "":
			t.Errorf("unexpected line %q", line)
		}
	}
	return out
}
