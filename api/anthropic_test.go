package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

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
			400, "invalid_request_error", "messages[0].content[0] is an image block; modeld's chat models read text only"},
		{"document in a tool result", `{"model":"claude-test","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"document","source":{}}]}]}]}`,
			400, "invalid_request_error", "messages[2].content[0].content[0] is an document block"},
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
	resp := anthropicBody[AnthropicResponse](t, w)
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

// TestAnthropicStream: the streaming guide's event sequence for a reply
// with reasoning, text and a tool call: message_start (usage with the
// prompt), ping, a thinking block (thinking_delta, then signature_delta),
// a text block, a tool_use block (input_json_delta pieces that join to the
// arguments), message_delta (stop_reason, usage), message_stop.
func TestAnthropicStream(t *testing.T) {
	m := &anthropicFake{cached: 2, script: []backends.Event{
		{Token: 1, Reasoning: "The user wants "}, {Token: 2, Reasoning: "the weather."},
		atext("Let me "), atext("check."),
		{Token: 3, ToolCalls: []backends.ToolCallDelta{{Index: 0, ID: "call_1", Name: "get_weather", Arguments: `{"location":`}}},
		{Token: 4, ToolCalls: []backends.ToolCallDelta{{Index: 0, Arguments: ` "Paris"}`}}},
		adone(backends.FinishToolCalls, 7)}}
	s := anthropicServer(t, m)
	w := postAnthropic(t, s, "/v1/messages", `{"model":"claude-test","max_tokens":64,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},
		"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Weather in Paris?"}]}`)
	if w.Code != 200 || w.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %s: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	evs := readAnthropicSSE(t, w.Body.String())
	var names []string
	for _, ev := range evs {
		name := ev.name
		if d, ok := ev.data["delta"].(map[string]any); ok && name == "content_block_delta" {
			name += ":" + d["type"].(string)
		}
		if b, ok := ev.data["content_block"].(map[string]any); ok {
			name += ":" + b["type"].(string)
		}
		names = append(names, name)
	}
	want := []string{"message_start", "ping",
		"content_block_start:thinking", "content_block_delta:thinking_delta", "content_block_delta:thinking_delta", "content_block_delta:signature_delta", "content_block_stop",
		"content_block_start:text", "content_block_delta:text_delta", "content_block_delta:text_delta", "content_block_stop",
		"content_block_start:tool_use", "content_block_delta:input_json_delta", "content_block_delta:input_json_delta", "content_block_stop",
		"message_delta", "message_stop"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("events\n got %v\nwant %v", names, want)
	}
	prompt := len("<user>Weather in Paris?")
	start := evs[0].data["message"].(map[string]any)
	if !strings.HasPrefix(start["id"].(string), "msg_") || start["role"] != "assistant" || start["stop_reason"] != nil ||
		start["usage"].(map[string]any)["input_tokens"] != float64(prompt) || len(start["content"].([]any)) != 0 {
		t.Errorf("message_start %v", start)
	}
	var partial strings.Builder
	for _, ev := range evs {
		if d, ok := ev.data["delta"].(map[string]any); ok && d["type"] == "input_json_delta" {
			partial.WriteString(d["partial_json"].(string))
			if ev.data["index"] != float64(2) {
				t.Errorf("tool delta at index %v", ev.data["index"])
			}
		}
	}
	if partial.String() != `{"location": "Paris"}` {
		t.Errorf("partial_json joins to %q", partial.String())
	}
	tool := evs[11].data["content_block"].(map[string]any)
	if tool["id"] != "toolu_1" || tool["name"] != "get_weather" || anthropicJSON(t, tool["input"]) != "{}" {
		t.Errorf("tool_use start %v", tool)
	}
	if sig := evs[5].data["delta"].(map[string]any)["signature"]; sig != thinkingSignature("The user wants the weather.") {
		t.Errorf("signature %v", sig)
	}
	md := evs[15].data
	if d := md["delta"].(map[string]any); d["stop_reason"] != "tool_use" || d["stop_sequence"] != nil {
		t.Errorf("message_delta %v", md)
	}
	if u := md["usage"].(map[string]any); u["output_tokens"] != float64(7) || u["input_tokens"] != float64(prompt-2) || u["cache_read_input_tokens"] != float64(2) {
		t.Errorf("message_delta usage %v", u)
	}

	// The same reply whole: the same blocks, the thinking block signed.
	w = postAnthropic(t, s, "/v1/messages", `{"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"Weather in Paris?"}],
		"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}`)
	resp := anthropicBody[AnthropicResponse](t, w)
	if len(resp.Content) != 3 || resp.Content[0].Type != "thinking" || *resp.Content[0].Thinking != "The user wants the weather." ||
		*resp.Content[0].Signature != thinkingSignature("The user wants the weather.") || *resp.Content[1].Text != "Let me check." ||
		string(resp.Content[2].Input) != `{"location":"Paris"}` || resp.Content[2].ID != "toolu_1" {
		t.Errorf("message %s", w.Body)
	}
}

// TestAnthropicStreamError: a generation that fails after the stream began
// ends it with an error event in Anthropic's shape, and no message_stop.
func TestAnthropicStreamError(t *testing.T) {
	m := &anthropicFake{script: []backends.Event{atext("Hel"), {Token: -1, Done: true, Finish: backends.FinishError, Err: fmt.Errorf("decode failed")}}}
	s := anthropicServer(t, m)
	w := postAnthropic(t, s, "/v1/messages", `{"model":"claude-test","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	evs := readAnthropicSSE(t, w.Body.String())
	last := evs[len(evs)-1]
	e, _ := last.data["error"].(map[string]any)
	if last.name != "error" || e["type"] != "api_error" || !strings.Contains(e["message"].(string), "decode failed") {
		t.Fatalf("last event %+v", last)
	}
	for _, ev := range evs {
		if ev.name == "message_stop" {
			t.Error("message_stop after an error")
		}
	}
	// Not streamed: a 500 api_error.
	w = postAnthropic(t, s, "/v1/messages", `{"model":"claude-test","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	if e := anthropicBody[anthropicError](t, w); w.Code != 500 || e.Error.Type != "api_error" {
		t.Errorf("%d %s", w.Code, w.Body)
	}
}

// TestAnthropicCountTokens: count_tokens (the reference's example: no
// max_tokens) is the prompt the same request's generation sees: its
// usage's input_tokens plus cache_read_input_tokens; tools count.
func TestAnthropicCountTokens(t *testing.T) {
	m := &anthropicFake{cached: 3, script: []backends.Event{atext("x"), adone(backends.FinishStop, 1)}}
	s := anthropicServer(t, m)
	conv := `"system":"You are a scientist","messages":[{"role":"user","content":"Hello, Claude"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"42"}]}]`
	w := postAnthropic(t, s, "/v1/messages/count_tokens", `{"model":"claude-test",`+conv+`}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	count := anthropicBody[map[string]int](t, w)
	resp := anthropicBody[AnthropicResponse](t, postAnthropic(t, s, "/v1/messages", `{"model":"claude-test","max_tokens":4,`+conv+`}`))
	want := len(`<system>You are a scientist<user>Hello, Claude<assistant>[f{"a":1}]<tool>42`)
	if len(count) != 1 || count["input_tokens"] != want || resp.Usage.InputTokens+resp.Usage.CacheReadInputTokens != want {
		t.Errorf("count_tokens %v, usage %+v, want %d", count, resp.Usage, want)
	}
	w = postAnthropic(t, s, "/v1/messages/count_tokens", `{"model":"claude-nope",`+conv+`}`)
	if e := anthropicBody[anthropicError](t, w); w.Code != 404 || e.Error.Type != "not_found_error" {
		t.Errorf("unknown model: %d %s", w.Code, w.Body)
	}
}

// TestAnthropicStopSequence: a generation that a stop sequence ended says
// stop_sequence and which one (streamed and not); one an end-of-generation
// token ended says end_turn.
func TestAnthropicStopSequence(t *testing.T) {
	raw := "1, 2, 3, STOP"
	var script []backends.Event
	for i := range raw {
		ev := backends.Event{Token: int32(raw[i])}
		if i < strings.Index(raw, "STOP") {
			ev.Text = raw[i : i+1]
		}
		script = append(script, ev)
	}
	final := adone(backends.FinishStop, len(raw))
	final.Stop = "STOP" // the backend names the stop string that matched
	m := &anthropicFake{script: append(script, final)}
	s := anthropicServer(t, m)
	body := `{"model":"claude-test","max_tokens":50,"stop_sequences":["END","STOP"],"messages":[{"role":"user","content":"count"}]}`
	resp := anthropicBody[AnthropicResponse](t, postAnthropic(t, s, "/v1/messages", body))
	if *resp.StopReason != "stop_sequence" || resp.StopSequence == nil || *resp.StopSequence != "STOP" || *resp.Content[0].Text != "1, 2, 3, " {
		t.Errorf("message %+v", resp)
	}
	evs := readAnthropicSSE(t, postAnthropic(t, s, "/v1/messages", strings.Replace(body, `"count"}]`, `"count"}],"stream":true`, 1)).Body.String())
	if d := evs[len(evs)-2].data["delta"].(map[string]any); d["stop_reason"] != "stop_sequence" || d["stop_sequence"] != "STOP" {
		t.Errorf("message_delta %v", d)
	}
	m.script = []backends.Event{{Token: 'o', Text: "o"}, {Token: 'k', Text: "k"}, adone(backends.FinishStop, 3)}
	resp = anthropicBody[AnthropicResponse](t, postAnthropic(t, s, "/v1/messages", body))
	if *resp.StopReason != "end_turn" || resp.StopSequence != nil {
		t.Errorf("message %+v", resp)
	}
}

// TestAnthropicErrorTypes: the statuses of the one error mapping take
// Anthropic's error types; a busy model is a 503 overloaded_error with
// Retry-After (Anthropic's API says 529; its clients retry both).
func TestAnthropicErrorTypes(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	for _, tc := range []struct {
		err    error
		status int
		typ    string
	}{
		{&cache.BusyError{ID: "m", Reason: "queue full", RetryAfter: 2 * time.Second}, 503, "overloaded_error"},
		{&Error{Status: 401, Message: "key"}, 401, "authentication_error"},
		{&Error{Status: 403, Message: "origin"}, 403, "permission_error"},
		{&Error{Status: 413, Message: "big"}, 413, "request_too_large"},
		{&Error{Status: 429, Message: "slow down"}, 429, "rate_limit_error"},
		{fmt.Errorf("%w: m", models.ErrNotFound), 404, "not_found_error"},
		{fmt.Errorf("boom"), 500, "api_error"},
	} {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest("POST", "/v1/messages", nil)
		writeAnthropicError(c, tc.err)
		e := anthropicBody[anthropicError](t, w)
		if w.Code != tc.status || e.Type != "error" || e.Error.Type != tc.typ || e.Error.Message == "" {
			t.Errorf("%v: %d %s; want %d %s", tc.err, w.Code, w.Body, tc.status, tc.typ)
		}
		if tc.status == 503 && w.Header().Get("Retry-After") != "2" {
			t.Errorf("busy: Retry-After %q", w.Header().Get("Retry-After"))
		}
	}
	if st := http.StatusServiceUnavailable; anthropicErrorType(&Error{Status: st}) != "api_error" {
		t.Error("a 503 without Retry-After is not overloaded")
	}
}

// TestAnthropicKeyAndPreflight: x-api-key is the key, as Anthropic's
// clients send it; a browser page (the SDK with dangerouslyAllowBrowser)
// may send Anthropic's headers.
func TestAnthropicKeyAndPreflight(t *testing.T) {
	s := anthropicServerKey(t, &anthropicFake{script: []backends.Event{atext("ok"), adone(backends.FinishStop, 1)}}, "sk-local")
	body := `{"model":"claude-test","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`
	for key, want := range map[string]int{"sk-local": 200, "sk-wrong": 401, "": 401} {
		req := httptest.NewRequest("POST", "http://localhost/v1/messages", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		if key != "" {
			req.Header.Set("x-api-key", key)
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		if w.Code != want {
			t.Errorf("x-api-key %q: %d %s, want %d", key, w.Code, w.Body, want)
		}
	}
	req := httptest.NewRequest("OPTIONS", "http://localhost/v1/messages", nil)
	req.Header.Set("Origin", "http://localhost:5173")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "anthropic-version,anthropic-beta,anthropic-dangerous-direct-browser-access,x-api-key,content-type")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	allow := strings.ToLower(w.Header().Get("Access-Control-Allow-Headers"))
	for _, h := range []string{"anthropic-version", "anthropic-beta", "anthropic-dangerous-direct-browser-access", "x-api-key"} {
		if w.Code != 204 || !strings.Contains(allow, h) {
			t.Errorf("preflight %d allows %q, not %s", w.Code, allow, h)
		}
	}
}

// TestAnthropicStreamPings: while the model has not answered (a long
// prompt being read), the stream sends pings; the message follows them.
func TestAnthropicStreamPings(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	events := make(chan backends.Event)
	engine := gin.New()
	engine.GET("/stream", func(c *gin.Context) {
		streamAnthropic(c, events, 5, "m", time.Millisecond)
	})
	srv := httptest.NewServer(engine)
	defer srv.Close()
	res, err := http.Get(srv.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	pings := 0
	for pings < 3 && sc.Scan() {
		if sc.Text() == "event: ping" {
			pings++
		}
	}
	events <- atext("late")
	events <- adone(backends.FinishStop, 1)
	close(events)
	var rest []string
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "event: ") && sc.Text() != "event: ping" {
			rest = append(rest, strings.TrimPrefix(sc.Text(), "event: "))
		}
	}
	want := "content_block_start content_block_delta content_block_stop message_delta message_stop"
	if pings != 3 || strings.Join(rest, " ") != want {
		t.Errorf("%d pings, then %v; want 3 pings, then %s", pings, rest, want)
	}
}

// TestAnthropicStructuredOutput: output_config.format (and the older
// output_format) is structured output through the same grammar as
// response_format; a schema keyword the grammar cannot enforce is a 400
// naming the field (or the tool's input_schema, under tool_choice any);
// tool_choice tool leaves the check with its call grammar.
func TestAnthropicStructuredOutput(t *testing.T) {
	m := &anthropicFake{script: []backends.Event{atext(`{"n":1}`), adone(backends.FinishStop, 2)}, got: make(chan backends.Request, 1)}
	s := anthropicServer(t, m)
	schema := `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`
	for _, field := range []string{`"output_config":{"effort":"low","format":{"type":"json_schema","schema":` + schema + `}}`,
		`"output_format":{"type":"json_schema","schema":` + schema + `}`} {
		w := postAnthropic(t, s, "/v1/messages", `{"model":"claude-test","max_tokens":16,"messages":[{"role":"user","content":"n?"}],`+field+`}`)
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", field, w.Code, w.Body)
		}
		if req := <-m.got; req.ResponseFormat.Type != backends.FormatJSONSchema || !strings.Contains(req.ResponseFormat.Grammar, "root ::=") {
			t.Errorf("%s: response format %+v", field, req.ResponseFormat)
		}
	}
	w := postAnthropic(t, s, "/v1/messages", `{"model":"claude-test","max_tokens":16,"messages":[{"role":"user","content":"n?"}],
		"output_config":{"format":{"type":"json_schema","schema":{"type":"integer","multipleOf":3}}}}`)
	if e := anthropicBody[anthropicError](t, w); w.Code != 400 || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, `output_config.format: the keyword "multipleOf"`) {
		t.Errorf("unenforceable schema: %d %s", w.Code, w.Body)
	}
	w = postAnthropic(t, s, "/v1/messages", `{"model":"claude-test","max_tokens":16,"messages":[{"role":"user","content":"n?"}],
		"tools":[{"name":"scan","input_schema":{"type":"object","patternProperties":{"^x":{}}}}],"tool_choice":{"type":"any"}}`)
	if e := anthropicBody[anthropicError](t, w); w.Code != 400 || !strings.Contains(e.Error.Message, `tool "scan"'s input_schema: the keyword "patternProperties"`) {
		t.Errorf("unenforceable input_schema: %d %s", w.Code, w.Body)
	}
	w = postAnthropic(t, s, "/v1/messages", `{"model":"claude-test","max_tokens":16,"messages":[{"role":"user","content":"n?"}],
		"tools":[{"name":"f","input_schema":`+schema+`}],"tool_choice":{"type":"tool","name":"f"}}`)
	if req := <-m.got; w.Code != 200 || req.ToolChoice.Grammar == "" {
		t.Errorf("tool_choice tool: %d, grammar %q", w.Code, req.ToolChoice.Grammar)
	}
}

// TestAnthropicToolInput: a call's arguments are the tool_use input when
// they are an object; other text travels whole under "arguments".
func TestAnthropicToolInput(t *testing.T) {
	for args, want := range map[string]string{`{"a": 1}`: `{"a": 1}`, "": `{}`, `[1]`: `{"arguments":"[1]"}`, `{"a":`: `{"arguments":"{\"a\":"}`} {
		if got := string(toolInput(args)); got != want {
			t.Errorf("toolInput(%q) = %s, want %s", args, got, want)
		}
	}
}

// FuzzAnthropicRequest: decoding and translating any Messages body (for
// /v1/messages and count_tokens) never panics, and a refusal is a proper
// 4xx *Error.
func FuzzAnthropicRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"hi"}],"stop_sequences":["x"]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"},{"type":"tool_use","id":"t","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}],"is_error":true}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
		`{"model":"m","max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":1024},"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}},"messages":[{"role":"user","content":[{"type":"image"}]}]}`,
		`{"model":"m","max_tokens":0,"temperature":3,"top_k":-1,"tools":[{"type":"web_search_20250305","name":"w"}],"messages":[]}`,
		`{"messages":[{"role":"system"}],"tool_choice":"auto","thinking":{},"mcp_servers":[{}]}`,
		`[]`, `null`, `{`, `{"messages":{}}`, `{"system":1}`,
	} {
		f.Add(false, []byte(s))
		f.Add(true, []byte(s))
	}
	f.Fuzz(func(t *testing.T, count bool, body []byte) {
		var req AnthropicRequest
		err := unmarshalBody(body, &req)
		if err == nil {
			_, err = req.plan(anthropicPlanning{contextCap: backends.DefaultContextCap, constraints: testConstraints, count: count})
		}
		if err != nil {
			checkRequestError(t, "messages", err)
		}
	})
}
