package api

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/anthropic"
	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/models"
)

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
	if sig := evs[5].data["delta"].(map[string]any)["signature"]; sig != anthropic.ThinkingSignature("The user wants the weather.") {
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
	resp := anthropicBody[anthropic.AnthropicResponse](t, w)
	if len(resp.Content) != 3 || resp.Content[0].Type != "thinking" || *resp.Content[0].Thinking != "The user wants the weather." ||
		*resp.Content[0].Signature != anthropic.ThinkingSignature("The user wants the weather.") || *resp.Content[1].Text != "Let me check." ||
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
	resp := anthropicBody[anthropic.AnthropicResponse](t, postAnthropic(t, s, "/v1/messages", `{"model":"claude-test","max_tokens":4,`+conv+`}`))
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
	resp := anthropicBody[anthropic.AnthropicResponse](t, postAnthropic(t, s, "/v1/messages", body))
	if *resp.StopReason != "stop_sequence" || resp.StopSequence == nil || *resp.StopSequence != "STOP" || *resp.Content[0].Text != "1, 2, 3, " {
		t.Errorf("message %+v", resp)
	}
	evs := readAnthropicSSE(t, postAnthropic(t, s, "/v1/messages", strings.Replace(body, `"count"}]`, `"count"}],"stream":true`, 1)).Body.String())
	if d := evs[len(evs)-2].data["delta"].(map[string]any); d["stop_reason"] != "stop_sequence" || d["stop_sequence"] != "STOP" {
		t.Errorf("message_delta %v", d)
	}
	m.script = []backends.Event{{Token: 'o', Text: "o"}, {Token: 'k', Text: "k"}, adone(backends.FinishStop, 3)}
	resp = anthropicBody[anthropic.AnthropicResponse](t, postAnthropic(t, s, "/v1/messages", body))
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
		{&core.Error{Status: 401, Message: "key"}, 401, "authentication_error"},
		{&core.Error{Status: 403, Message: "origin"}, 403, "permission_error"},
		{&core.Error{Status: 413, Message: "big"}, 413, "request_too_large"},
		{&core.Error{Status: 429, Message: "slow down"}, 429, "rate_limit_error"},
		{fmt.Errorf("%w: m", models.ErrNotFound), 404, "not_found_error"},
		{fmt.Errorf("boom"), 500, "api_error"},
	} {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest("POST", "/v1/messages", nil)
		anthropic.WriteAnthropicError(c, tc.err)
		e := anthropicBody[anthropicError](t, w)
		if w.Code != tc.status || e.Type != "error" || e.Error.Type != tc.typ || e.Error.Message == "" {
			t.Errorf("%v: %d %s; want %d %s", tc.err, w.Code, w.Body, tc.status, tc.typ)
		}
		if tc.status == 503 && w.Header().Get("Retry-After") != "2" {
			t.Errorf("busy: Retry-After %q", w.Header().Get("Retry-After"))
		}
	}
	if st := http.StatusServiceUnavailable; anthropic.AnthropicErrorType(&core.Error{Status: st}) != "api_error" {
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
		anthropic.StreamAnthropic(c, events, 5, "m", time.Millisecond)
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
		if got := string(anthropic.ToolInput(args)); got != want {
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
		var req anthropic.AnthropicRequest
		err := core.UnmarshalBody(body, &req)
		if err == nil {
			_, err = req.Plan(anthropic.AnthropicPlanning{ContextCap: backends.DefaultContextCap, Constraints: testConstraints, Count: count})
		}
		if err != nil {
			checkRequestError(t, "messages", err)
		}
	})
}
