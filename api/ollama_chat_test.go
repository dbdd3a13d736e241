package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modeld/modeld/api/ollama"
	"github.com/modeld/modeld/backends"
)

// docs/api.md "Chat Request (Streaming)", "(No streaming)" and "(With
// History)"; think and message.thinking.
func TestOllamaChat(t *testing.T) {
	e := ollamaServer(t, "")
	e.chat.reply = func(req backends.Request) []backends.Event {
		return []backends.Event{{Token: 1, Reasoning: "Rayleigh"}, {Token: 2, Text: "Scattering."},
			{Token: -1, Done: true, Finish: backends.FinishLength, Usage: backends.Usage{PromptTokens: len(req.Prompt), CompletionTokens: 2}}}
	}
	body := `{"model": "org/chat", "messages": [{"role": "user", "content": "why is the sky blue?"}, {"role": "assistant", "content": "due to rayleigh scattering."},
	  {"role": "user", "content": "how is that different than mie scattering?"}]}`
	w := e.call(t, "POST", "/api/chat", body)
	lines := ndjson(t, w.Body.String())
	if w.Code != 200 || len(lines) != 3 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	m0, m1 := lines[0]["message"].(map[string]any), lines[1]["message"].(map[string]any)
	if m0["role"] != "assistant" || m0["thinking"] != "Rayleigh" || m0["content"] != "" || m1["content"] != "Scattering." || lines[0]["done"] != false {
		t.Errorf("deltas %v %v", lines[0], lines[1])
	}
	prompt := "<user>why is the sky blue?<assistant>due to rayleigh scattering.<user>how is that different than mie scattering?"
	checkFinal(t, lines[2], "length", len(prompt), 2)
	if _, vars := e.chat.last(t); len(vars) != 2 || vars["enable_thinking"] != true || vars["thinking"] != true {
		t.Errorf("template vars %v without think, want thinking on (Ollama's default)", vars)
	}

	w = e.call(t, "POST", "/api/chat", `{"model": "org/chat", "messages": [{"role": "user", "content": "Hello!"}], "stream": false, "think": false, "options": {"seed": 101, "temperature": 0}}`)
	var one struct {
		Message ollama.OllamaMessage `json:"message"`
		Done    bool                 `json:"done"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &one); err != nil || w.Code != 200 || !one.Done || one.Message.Content != "Scattering." || one.Message.Thinking != "Rayleigh" {
		t.Fatalf("non-streamed: %d %s", w.Code, w.Body)
	}
	req, vars := e.chat.last(t)
	if vars["enable_thinking"] != false || req.Sampling.Temperature != 0 || *req.Sampling.Seed != 101 {
		t.Errorf("think false: vars %v, sampling %+v", vars, req.Sampling)
	}
	for think, want := range map[string]map[string]any{
		`true`:   {"enable_thinking": true, "thinking": true},
		`"high"`: {"enable_thinking": true, "reasoning_effort": "high", "thinking": true},
		`"low"`:  {"enable_thinking": true, "reasoning_effort": "low", "thinking": true},
	} {
		e.call(t, "POST", "/api/chat", `{"model": "org/chat", "messages": [{"role": "user", "content": "Hello!"}], "stream": false, "think": `+think+`}`)
		if _, vars := e.chat.last(t); fmt.Sprint(vars) != fmt.Sprint(want) {
			t.Errorf("think %s: vars %v, want %v", think, vars, want)
		}
	}
	ollamaErr(t, e.call(t, "POST", "/api/chat", `{"model":"org/chat","messages":[{"role":"robot","content":"x"}]}`), 400, "messages[0].role")
	ollamaErr(t, e.call(t, "POST", "/api/chat", `{"model":"org/chat","messages":[{"role":"user","content":"x"}],"logprobs":true}`), 400, "logprobs")
	ollamaErr(t, e.call(t, "POST", "/api/chat", `{"model":"org/chat","messages":[{"role":"user","content":"x","images":["aGk="]}]}`), 400, "not a PNG, JPEG or WebP image")
}

// docs/api.md "Chat request (with tools)": the tools reach the backend;
// the call comes back whole, arguments as an object, done_reason stop,
// streamed and not. A round trip (the call, then a tool message with
// tool_name) reaches the template linked by id.
func TestOllamaTools(t *testing.T) {
	e := ollamaServer(t, "")
	e.chat.reply = func(req backends.Request) []backends.Event {
		return []backends.Event{
			{Token: 1, ToolCalls: []backends.ToolCallDelta{{Index: 0, ID: "call_x", Name: "get_current_weather"}}},
			{Token: 2, ToolCalls: []backends.ToolCallDelta{{Index: 0, Arguments: `{"format": "celsius", `}}},
			{Token: 3, ToolCalls: []backends.ToolCallDelta{{Index: 0, Arguments: `"location": "Paris, FR"}`}}},
			{Token: -1, Done: true, Finish: backends.FinishToolCalls, Usage: backends.Usage{PromptTokens: 9, CompletionTokens: 3}},
		}
	}
	tools := `[{"type": "function", "function": {"name": "get_current_weather", "description": "Get the current weather for a location",
	  "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "The location"},
	  "format": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location", "format"]}}}]`
	body := `{"model": "org/chat", "messages": [{"role": "user", "content": "What is the weather today in Paris?"}], "stream": false, "tools": ` + tools + `}`
	w := e.call(t, "POST", "/api/chat", body)
	var one struct {
		Message    ollama.OllamaMessage `json:"message"`
		DoneReason string               `json:"done_reason"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &one); err != nil || w.Code != 200 || one.DoneReason != "stop" || len(one.Message.ToolCalls) != 1 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var args map[string]string
	if tc := one.Message.ToolCalls[0]; tc.Function.Name != "get_current_weather" || json.Unmarshal(tc.Function.Arguments, &args) != nil ||
		args["location"] != "Paris, FR" || args["format"] != "celsius" {
		t.Errorf("tool call %s", w.Body)
	}
	if req, _ := e.chat.last(t); len(req.Tools) != 1 || req.Tools[0].Name != "get_current_weather" || req.ToolChoice.Mode != "" {
		t.Errorf("the backend got tools %+v choice %+v", req.Tools, req.ToolChoice)
	}
	w = e.call(t, "POST", "/api/chat", strings.Replace(body, `"stream": false`, `"stream": true`, 1))
	lines := ndjson(t, w.Body.String())
	if len(lines) != 2 || lines[1]["done"] != true {
		t.Fatalf("streamed %s", w.Body)
	}
	calls, _ := lines[0]["message"].(map[string]any)["tool_calls"].([]any)
	if len(calls) != 1 || lines[0]["done"] != false {
		t.Errorf("streamed calls %v", lines[0])
	}

	e.chat.reply = nil
	round := `{"model": "org/chat", "stream": false, "tools": ` + tools + `, "messages": [
	  {"role": "user", "content": "What is the weather today in Paris?"},
	  {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_current_weather", "arguments": {"location": "Paris, FR", "format": "celsius"}}}]},
	  {"role": "tool", "content": "22 degrees", "tool_name": "get_current_weather"}]}`
	if w := e.call(t, "POST", "/api/chat", round); w.Code != 200 {
		t.Fatalf("round trip: %d %s", w.Code, w.Body)
	}
	req, _ := e.chat.last(t)
	if len(req.Messages) != 3 || len(req.Messages[1].ToolCalls) != 1 || req.Messages[2].Role != "tool" ||
		req.Messages[2].ToolCallID == "" || req.Messages[2].ToolCallID != req.Messages[1].ToolCalls[0].ID || req.Messages[2].Name != "get_current_weather" {
		t.Fatalf("messages %+v", req.Messages)
	}
	var sent map[string]string
	if err := json.Unmarshal([]byte(req.Messages[1].ToolCalls[0].Arguments), &sent); err != nil || sent["location"] != "Paris, FR" {
		t.Errorf("call arguments %q", req.Messages[1].ToolCalls[0].Arguments)
	}
	ollamaErr(t, e.call(t, "POST", "/api/chat", `{"model":"org/chat","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"bad name"}}]}`), 400, "tools[0]")
	// Every tool is checked, each named at its own index.
	ollamaErr(t, e.call(t, "POST", "/api/chat", `{"model":"org/chat","messages":[{"role":"user","content":"x"}],"tools":[{"type":"code"},{"type":"function","function":{"name":"bad name"}}]}`), 400, `tools[1].function.name "bad name" must be`)
}

// docs/api.md "Generate Embeddings" (one and several inputs) and the older
// "Generate Embedding".
func TestOllamaEmbed(t *testing.T) {
	e := ollamaServer(t, "")
	w := e.call(t, "POST", "/api/embed", `{"model": "org/embed", "input": "Why is the sky blue?"}`)
	var res struct {
		Model           string      `json:"model"`
		Embeddings      [][]float32 `json:"embeddings"`
		PromptEvalCount int         `json:"prompt_eval_count"`
		TotalDuration   *int64      `json:"total_duration"`
		LoadDuration    *int64      `json:"load_duration"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil || w.Code != 200 || res.Model != "org/embed" || len(res.Embeddings) != 1 ||
		len(res.Embeddings[0]) != 4 || res.PromptEvalCount != 3 || res.TotalDuration == nil || res.LoadDuration == nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if n := e.embed.gotOpts.Normalize; n == nil || !*n {
		t.Errorf("/api/embed vectors not normalized: %+v", e.embed.gotOpts)
	}
	w = e.call(t, "POST", "/api/embed", `{"model": "org/embed", "input": ["Why is the sky blue?", "Why is the grass green?"]}`)
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil || w.Code != 200 || len(res.Embeddings) != 2 || len(e.embed.gotTexts) != 2 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	w = e.call(t, "POST", "/api/embeddings", `{"model": "org/embed", "prompt": "Here is an article about llamas..."}`)
	var old struct {
		Embedding []float32 `json:"embedding"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &old); err != nil || w.Code != 200 || len(old.Embedding) != 4 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if n := e.embed.gotOpts.Normalize; n == nil || *n {
		t.Errorf("/api/embeddings normalized: %+v", e.embed.gotOpts)
	}
	e.embed.truncated = 1
	ollamaErr(t, e.call(t, "POST", "/api/embed", `{"model": "org/embed", "input": "long", "truncate": false}`), 400, "truncate")
	ollamaErr(t, e.call(t, "POST", "/api/embed", `{"model": "org/embed", "input": []}`), 400, "input")
	ollamaErr(t, e.call(t, "POST", "/api/embed", `{"model": "org/chat", "input": "x"}`), 400, "serves")
}
