package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// respModel is a chat model with a template ("<role>content" per turn) and
// a byte tokenizer, whose answer reply scripts from the request. It records
// each request and the template variables its prompt was rendered with.
type respModel struct {
	byteTokenizer
	reply func(req backends.Request) []backends.Event
	// generate, when set, answers instead of reply.
	generate func(ctx context.Context, req backends.Request) <-chan backends.Event
	mu       sync.Mutex
	reqs     []backends.Request
	vars     []map[string]any
}

func (m *respModel) Close() error        { return nil }
func (m *respModel) Size() int64         { return 1 }
func (m *respModel) Slots() int          { return 4 }
func (m *respModel) Info() backends.Info { return backends.Info{ContextSize: 4096} }
func (m *respModel) ApplyChatTemplateContext(ctx context.Context, msgs []backends.Message, _ bool) (string, error) {
	m.mu.Lock()
	m.vars = append(m.vars, backends.TemplateVars(ctx))
	m.mu.Unlock()
	var sb strings.Builder
	for _, msg := range msgs {
		sb.WriteString("<" + msg.Role + ">" + msg.Content)
	}
	return sb.String(), nil
}
func (m *respModel) Generate(ctx context.Context, req backends.Request) (<-chan backends.Event, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	if m.generate != nil {
		return m.generate(ctx, req), nil
	}
	evs := m.reply(req)
	ch := make(chan backends.Event, len(evs))
	for _, ev := range evs {
		if ev.Done {
			ev.Usage.PromptTokens = len(req.Prompt)
		}
		ch <- ev
	}
	close(ch)
	return ch, nil
}

// last is the latest request the model got.
func (m *respModel) last(t *testing.T) backends.Request {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.reqs) == 0 {
		t.Fatal("the model got no request")
	}
	return m.reqs[len(m.reqs)-1]
}

// echoReply answers "echo: " and the last turn's text.
func echoReply(req backends.Request) []backends.Event {
	last := req.Messages[len(req.Messages)-1].Content
	return []backends.Event{{Token: 1, Text: "echo: "}, {Token: 2, Text: last},
		{Token: -1, Done: true, Finish: backends.FinishStop, Usage: backends.Usage{CompletionTokens: 3, CachedTokens: 2}}}
}

// callReply answers with one call of get_weather, streamed in pieces.
func callReply(backends.Request) []backends.Event {
	return []backends.Event{
		{Token: 1, ToolCalls: []backends.ToolCallDelta{{Index: 0, ID: "call_abc", Name: "get_weather"}}},
		{Token: 2, ToolCalls: []backends.ToolCallDelta{{Index: 0, Arguments: `{"city":`}}},
		{Token: 3, ToolCalls: []backends.ToolCallDelta{{Index: 0, Arguments: `"Paris"}`}}},
		{Token: -1, Done: true, Finish: backends.FinishToolCalls, Usage: backends.Usage{CompletionTokens: 4}},
	}
}

func respServer(t *testing.T, reply func(backends.Request) []backends.Event, cfg ResponseStoreConfig) (*Server, *respModel) {
	t.Helper()
	m := &respModel{reply: reply}
	resolve := func(_ context.Context, id string) (cache.Spec, error) { return cache.Spec{ID: id, Task: "chat"}, nil }
	load := func(context.Context, cache.Spec) (cache.Instance, error) { return m, nil }
	c, err := cache.New(cache.DefaultConfig(), resolve, load)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: c, Responses: cfg}), m
}

// decodeObject decodes a JSON answer into a generic object.
func decodeObject(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("%v: %s", err, w.Body)
	}
	return v
}

// get is a JSON path into a decoded object: keys and array indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// TestResponsesCreateWire: the reference's first example (a string input)
// gives a response object of the documented shape: id resp_..., status
// completed, one assistant message item with an output_text part and
// annotations, usage with input and output details, and the request's
// fields echoed with their defaults. instructions is a system turn first.
func TestResponsesCreateWire(t *testing.T) {
	s, m := respServer(t, echoReply, ResponseStoreConfig{})
	w := post(t, s, "/v1/responses", `{"model":"m","input":"Tell me a three sentence bedtime story about a unicorn."}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	r := decodeObject(t, w)
	id, _ := r["id"].(string)
	if !strings.HasPrefix(id, "resp_") || r["object"] != "response" || r["status"] != "completed" || r["model"] != "m" || r["created_at"] == nil {
		t.Fatalf("envelope: %s", w.Body)
	}
	out := get(r, "output", 0)
	if get(out, "type") != "message" || get(out, "role") != "assistant" || get(out, "status") != "completed" ||
		!strings.HasPrefix(get(out, "id").(string), "msg_") || get(out, "content", 0, "type") != "output_text" ||
		get(out, "content", 0, "text") != "echo: Tell me a three sentence bedtime story about a unicorn." ||
		!reflect.DeepEqual(get(out, "content", 0, "annotations"), []any{}) {
		t.Fatalf("output: %s", w.Body)
	}
	prompt := float64(len("<user>Tell me a three sentence bedtime story about a unicorn."))
	u := r["usage"]
	if get(u, "input_tokens") != prompt || get(u, "output_tokens") != 3.0 || get(u, "total_tokens") != prompt+3 ||
		get(u, "input_tokens_details", "cached_tokens") != 2.0 || get(u, "output_tokens_details", "reasoning_tokens") != 0.0 {
		t.Fatalf("usage: %s", w.Body)
	}
	echoed := map[string]any{"temperature": 1.0, "top_p": 1.0, "tool_choice": "auto", "parallel_tool_calls": true, "store": true,
		"instructions": nil, "previous_response_id": nil, "incomplete_details": nil, "error": nil, "truncation": "disabled"}
	for k, v := range echoed {
		if got, ok := r[k]; !ok || !reflect.DeepEqual(got, v) {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if w.Header().Get(DeviceHeader) != "cpu" {
		t.Errorf("device header %q", w.Header().Get(DeviceHeader))
	}
	if !reflect.DeepEqual(r["tools"], []any{}) || !reflect.DeepEqual(r["metadata"], map[string]any{}) || get(r, "text", "format", "type") != "text" {
		t.Errorf("tools, metadata, text: %s", w.Body)
	}

	w = post(t, s, "/v1/responses", `{"model":"m","instructions":"Talk like a pirate.","input":"Are semicolons optional in JavaScript?",`+
		`"temperature":0.2,"top_p":0.5,"max_output_tokens":50,"metadata":{"k":"v"},"user":"u1"}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	req := m.last(t)
	if len(req.Messages) != 2 || !reflect.DeepEqual(req.Messages[0], backends.Message{Role: "system", Content: "Talk like a pirate."}) ||
		req.Messages[1].Role != "user" || req.MaxTokens != 50 || req.Sampling.Temperature != 0.2 || req.Sampling.TopP != 0.5 {
		t.Fatalf("the model got %+v", req)
	}
	r = decodeObject(t, w)
	if r["instructions"] != "Talk like a pirate." || r["temperature"] != 0.2 || r["max_output_tokens"] != 50.0 || get(r, "metadata", "k") != "v" || r["user"] != "u1" {
		t.Fatalf("echoed: %s", w.Body)
	}
}

// TestResponsesInputItems: a list of input items (the reference's forms:
// an easy message with a string, typed messages with input_text and
// output_text parts, developer as system, function_call items joining the
// assistant turn before them, function_call_output as a tool turn named
// after its call, a reasoning item kept out of the prompt) reaches the
// model as the one internal conversation.
func TestResponsesInputItems(t *testing.T) {
	s, m := respServer(t, echoReply, ResponseStoreConfig{})
	body := `{"model":"m","input":[
		{"role":"developer","content":"Be brief."},
		{"role":"user","content":"What is the weather like in Paris today?"},
		{"type":"reasoning","id":"rs_1","summary":[]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Let me check.","annotations":[]}]},
		{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"},
		{"type":"function_call_output","call_id":"call_1","output":"{\"temp_c\":21}"},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"And "},{"type":"input_text","text":"tomorrow?"}]}
	]}`
	w := post(t, s, "/v1/responses", body)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	want := []backends.Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "What is the weather like in Paris today?"},
		{Role: "assistant", Content: "Let me check.", ToolCalls: []backends.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{Role: "tool", ToolCallID: "call_1", Name: "get_weather", Content: `{"temp_c":21}`},
		{Role: "user", Content: "And tomorrow?"},
	}
	if got := m.last(t).Messages; !reflect.DeepEqual(got, want) {
		t.Fatalf("messages:\n got %+v\nwant %+v", got, want)
	}
	// A function_call with no assistant text before it is an assistant turn of its own.
	w = post(t, s, "/v1/responses", `{"model":"m","input":[{"role":"user","content":"hi"},
		{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"g","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"one"}]},{"type":"function_call_output","call_id":"c2","output":"two"}]}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	got := m.last(t).Messages
	if len(got) != 4 || got[1].Role != "assistant" || len(got[1].ToolCalls) != 2 || got[2].Content != "one" || got[3].Name != "g" {
		t.Fatalf("messages: %+v", got)
	}
}

// TestResponsesFunctionCall: the reference's function-calling example:
// a flat function tool and tool_choice naming it reach the model as the
// tool and a named choice (its call grammar compiled before the model was
// acquired); the call is a function_call output item with call_id, name
// and arguments, status completed.
func TestResponsesFunctionCall(t *testing.T) {
	s, m := respServer(t, callReply, ResponseStoreConfig{})
	body := `{"model":"m","input":"What is the weather like in Paris today?","tools":[{"type":"function","name":"get_weather",
		"description":"Get current temperature for a given location.","parameters":{"type":"object","properties":{"city":{"type":"string"}},
		"required":["city"],"additionalProperties":false},"strict":true}],"tool_choice":{"type":"function","name":"get_weather"},"parallel_tool_calls":false}`
	w := post(t, s, "/v1/responses", body)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	req := m.last(t)
	if len(req.Tools) != 1 || req.Tools[0].Name != "get_weather" || !req.Tools[0].Strict || req.Tools[0].Description == "" ||
		req.ToolChoice.Mode != backends.ToolChoiceFunction || req.ToolChoice.Name != "get_weather" || !req.ToolChoice.Single || req.ToolChoice.Grammar == "" {
		t.Fatalf("the model got tools %+v, choice %+v", req.Tools, req.ToolChoice)
	}
	r := decodeObject(t, w)
	out := get(r, "output", 0)
	if n := len(r["output"].([]any)); n != 1 || get(out, "type") != "function_call" || get(out, "call_id") != "call_abc" ||
		get(out, "name") != "get_weather" || get(out, "arguments") != `{"city":"Paris"}` || get(out, "status") != "completed" ||
		!strings.HasPrefix(get(out, "id").(string), "fc_") || r["parallel_tool_calls"] != false || get(r, "tool_choice", "name") != "get_weather" ||
		get(r, "tools", 0, "name") != "get_weather" {
		t.Fatalf("response: %s", w.Body)
	}
}

// sseEvent is one event of a Responses stream.
type sseEvent struct {
	name string
	data map[string]any
}

// readResponseEvents parses a Responses stream: each event is an event:
// line naming its type and a data: line whose type is the same.
func readResponseEvents(t *testing.T, body string) []sseEvent {
	t.Helper()
	var out []sseEvent
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("data %q: %v", line, err)
			}
			if d["type"] != name {
				t.Fatalf("event %q carries type %v", name, d["type"])
			}
			if seq, _ := d["sequence_number"].(float64); int(seq) != len(out) {
				t.Fatalf("event %d has sequence_number %v", len(out), d["sequence_number"])
			}
			out = append(out, sseEvent{name, d})
			name = ""
		default:
			t.Fatalf("not an SSE line: %q", line)
		}
	}
	return out
}

func eventNames(evs []sseEvent) []string {
	var names []string
	for _, e := range evs {
		names = append(names, e.name)
	}
	return names
}

// TestResponsesStreamText: a streamed text answer is the reference's event
// sequence, numbered from 0, and its final response.completed carries the
// same output and usage as the answer returned whole.
func TestResponsesStreamText(t *testing.T) {
	s, _ := respServer(t, echoReply, ResponseStoreConfig{})
	w := post(t, s, "/v1/responses", `{"model":"m","input":"hi","stream":true}`)
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %s: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	evs := readResponseEvents(t, w.Body.String())
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.done", "response.content_part.done",
		"response.output_item.done", "response.completed"}
	if got := eventNames(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got %v\nwant %v", got, want)
	}
	if get(evs[0].data, "response", "status") != "in_progress" || get(evs[0].data, "response", "usage") != nil {
		t.Errorf("created: %v", evs[0].data)
	}
	itemID := get(evs[2].data, "item", "id")
	for _, e := range evs[3:9] {
		if e.data["item_id"] != nil && e.data["item_id"] != itemID || get(e.data, "output_index") != 0.0 {
			t.Errorf("%s: %v", e.name, e.data)
		}
	}
	if evs[4].data["delta"] != "echo: " || evs[5].data["delta"] != "hi" || evs[6].data["text"] != "echo: hi" ||
		get(evs[8].data, "item", "content", 0, "text") != "echo: hi" || get(evs[8].data, "item", "status") != "completed" {
		t.Errorf("text events: %v", evs[4:9])
	}
	final := evs[len(evs)-1].data["response"]
	whole := decodeObject(t, post(t, s, "/v1/responses", `{"model":"m","input":"hi"}`))
	if get(final, "status") != "completed" || !reflect.DeepEqual(get(final, "usage"), whole["usage"]) ||
		get(final, "output", 0, "content", 0, "text") != get(whole, "output", 0, "content", 0, "text") {
		t.Fatalf("final %v\nwhole %v", final, whole)
	}
}

// TestResponsesStreamFunctionCall: a streamed call is output_item.added
// with the call's name and call_id, arguments deltas, arguments done with
// the whole arguments, output_item.done, then response.completed.
func TestResponsesStreamFunctionCall(t *testing.T) {
	s, _ := respServer(t, callReply, ResponseStoreConfig{})
	w := post(t, s, "/v1/responses", `{"model":"m","input":"weather?","stream":true,"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`)
	evs := readResponseEvents(t, w.Body.String())
	want := []string{"response.created", "response.in_progress", "response.output_item.added",
		"response.function_call_arguments.delta", "response.function_call_arguments.delta", "response.function_call_arguments.done",
		"response.output_item.done", "response.completed"}
	if got := eventNames(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got %v\nwant %v", got, want)
	}
	if get(evs[2].data, "item", "type") != "function_call" || get(evs[2].data, "item", "name") != "get_weather" ||
		get(evs[2].data, "item", "call_id") != "call_abc" || get(evs[2].data, "item", "arguments") != "" ||
		evs[5].data["arguments"] != `{"city":"Paris"}` || get(evs[6].data, "item", "arguments") != `{"city":"Paris"}` ||
		get(evs[7].data, "response", "output", 0, "call_id") != "call_abc" {
		t.Fatalf("events: %v", evs)
	}
}

// TestResponsesReasoning: a reasoning model's reasoning is a reasoning
// output item before the message, its text a reasoning_text content part
// (and the summary when reasoning.summary asks for one); streamed as
// reasoning_text deltas; its tokens are usage's reasoning_tokens.
// reasoning.effort sets the template's enable_thinking.
func TestResponsesReasoning(t *testing.T) {
	s, m := respServer(t, reasoningReply, ResponseStoreConfig{})
	w := post(t, s, "/v1/responses", `{"model":"m","input":"prime?","reasoning":{"effort":"high","summary":"auto"}}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	r := decodeObject(t, w)
	rs, msg := get(r, "output", 0), get(r, "output", 1)
	if get(rs, "type") != "reasoning" || !strings.HasPrefix(get(rs, "id").(string), "rs_") || get(rs, "content", 0, "type") != "reasoning_text" ||
		get(rs, "content", 0, "text") != "2 is prime." || get(rs, "summary", 0, "type") != "summary_text" || get(rs, "summary", 0, "text") != "2 is prime." ||
		get(msg, "type") != "message" || get(msg, "content", 0, "text") != "Two." ||
		get(r, "usage", "output_tokens_details", "reasoning_tokens") != 3.0 || get(r, "reasoning", "effort") != "high" {
		t.Fatalf("response: %s", w.Body)
	}
	m.mu.Lock()
	vars := m.vars[len(m.vars)-1]
	m.mu.Unlock()
	if vars["enable_thinking"] != true {
		t.Errorf("effort high: template vars %v", vars)
	}
	post(t, s, "/v1/responses", `{"model":"m","input":"prime?","reasoning":{"effort":"none"}}`)
	m.mu.Lock()
	vars = m.vars[len(m.vars)-1]
	m.mu.Unlock()
	if vars["enable_thinking"] != false {
		t.Errorf("effort none: template vars %v", vars)
	}

	w = post(t, s, "/v1/responses", `{"model":"m","input":"prime?","stream":true}`)
	evs := readResponseEvents(t, w.Body.String())
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.reasoning_text.delta", "response.reasoning_text.delta",
		"response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done",
		"response.content_part.done", "response.output_item.done", "response.completed"}
	if got := eventNames(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got %v\nwant %v", got, want)
	}
	if get(evs[3].data, "part", "type") != "reasoning_text" || evs[6].data["text"] != "2 is prime." || get(evs[9].data, "output_index") != 1.0 {
		t.Fatalf("reasoning events: %v", evs[3:10])
	}
}

// TestResponsesIncomplete: a generation cut by max_output_tokens is status
// incomplete with incomplete_details.reason max_output_tokens, whole and
// streamed (ending with response.incomplete).
func TestResponsesIncomplete(t *testing.T) {
	s, _ := respServer(t, func(backends.Request) []backends.Event {
		return []backends.Event{{Token: 1, Text: "Once"}, {Token: -1, Done: true, Finish: backends.FinishLength, Usage: backends.Usage{CompletionTokens: 1}}}
	}, ResponseStoreConfig{})
	r := decodeObject(t, post(t, s, "/v1/responses", `{"model":"m","input":"story","max_output_tokens":1}`))
	if r["status"] != "incomplete" || get(r, "incomplete_details", "reason") != "max_output_tokens" || get(r, "output", 0, "status") != "incomplete" {
		t.Fatalf("response: %v", r)
	}
	evs := readResponseEvents(t, post(t, s, "/v1/responses", `{"model":"m","input":"story","max_output_tokens":1,"stream":true}`).Body.String())
	last := evs[len(evs)-1]
	if last.name != "response.incomplete" || get(last.data, "response", "incomplete_details", "reason") != "max_output_tokens" {
		t.Fatalf("last event: %v", last)
	}
}

// TestResponsesGenerationError: a generation that fails is an OpenAI error
// object when returned whole; in a stream, an error event then
// response.failed with the error.
func TestResponsesGenerationError(t *testing.T) {
	s, _ := respServer(t, func(backends.Request) []backends.Event {
		return []backends.Event{{Token: 1, Text: "par"}, {Token: -1, Done: true, Finish: backends.FinishError, Err: errors.New("runner died")}}
	}, ResponseStoreConfig{})
	w := post(t, s, "/v1/responses", `{"model":"m","input":"x"}`)
	if e := decodeError(t, w); w.Code != 500 || !strings.Contains(e.Error.Message, "runner died") {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	evs := readResponseEvents(t, post(t, s, "/v1/responses", `{"model":"m","input":"x","stream":true}`).Body.String())
	n := len(evs)
	if n < 2 || evs[n-2].name != "error" || !strings.Contains(evs[n-2].data["message"].(string), "runner died") ||
		evs[n-1].name != "response.failed" || get(evs[n-1].data, "response", "status") != "failed" ||
		!strings.Contains(get(evs[n-1].data, "response", "error", "message").(string), "runner died") {
		t.Fatalf("events: %v", evs)
	}
}

// TestResponsesStructuredOutput: text.format json_schema is the same
// grammar as response_format's (compiled before the model is acquired),
// echoed in the response; a schema the grammar cannot enforce is a 400 on
// text.format.
func TestResponsesStructuredOutput(t *testing.T) {
	s, m := respServer(t, echoReply, ResponseStoreConfig{})
	schema := `{"type":"object","properties":{"name":{"type":"string"},"date":{"type":"string"}},"required":["name","date"],"additionalProperties":false}`
	w := post(t, s, "/v1/responses", `{"model":"m","input":"Alice and Bob are going to a science fair on Friday.",`+
		`"text":{"format":{"type":"json_schema","name":"calendar_event","schema":`+schema+`,"strict":true}}}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	rf := m.last(t).ResponseFormat
	var chat backends.Request
	chat.ResponseFormat = backends.ResponseFormat{Type: backends.FormatJSONSchema, Name: "calendar_event", Schema: json.RawMessage(schema), Strict: true}
	if err := backends.CompileResponseFormat(testConstraints, &chat.ResponseFormat); err != nil {
		t.Fatal(err)
	}
	if rf.Type != backends.FormatJSONSchema || rf.Name != "calendar_event" || !rf.Strict || rf.Grammar == "" || rf.Grammar != chat.ResponseFormat.Grammar {
		t.Fatalf("format %+v", rf)
	}
	if r := decodeObject(t, w); get(r, "text", "format", "name") != "calendar_event" || get(r, "text", "format", "type") != "json_schema" {
		t.Fatalf("echoed text: %v", r["text"])
	}
	post(t, s, "/v1/responses", `{"model":"m","input":"x","text":{"format":{"type":"json_object"}}}`)
	if rf := m.last(t).ResponseFormat; rf.Type != backends.FormatJSONObject || rf.Grammar == "" {
		t.Fatalf("json_object: %+v", rf)
	}
	w = post(t, s, "/v1/responses", `{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"a","schema":{"type":"integer","multipleOf":3}}}}`)
	if e := decodeError(t, w); w.Code != 400 || e.Error.Param == nil || *e.Error.Param != "text.format" || !strings.Contains(e.Error.Message, "multipleOf") {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
}

// TestResponsesRefusals: what modeld cannot honour is a 400 naming the
// field (image and file parts, background, conversation, stored prompts,
// hosted tool choices, custom tool formats it cannot read); the fields agent
// CLIs send that do not change the answer are accepted.
func TestResponsesRefusals(t *testing.T) {
	s, _ := respServer(t, echoReply, ResponseStoreConfig{})
	cases := []struct{ body, param, says string }{
		{`{"model":"m","input":"x","tool_choice":{"type":"web_search_preview"}}`, "tool_choice", "web_search_preview"},
		{`{"model":"m","input":"x","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}}`, "tool_choice", "web_search"},
		{`{"model":"m","input":"x","tools":[{"type":"custom","name":"p","format":{"type":"grammar","syntax":"ebnf","definition":"x"}}]}`, "tools[0].format.syntax", "ebnf"},
		{`{"model":"m","input":"x","tools":[{"type":"custom","name":"p","format":{"type":"yaml"}}]}`, "tools[0].format.type", "yaml"},
		{`{"model":"m","input":"x","tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"a b"}]}]}`, "tools[0].tools[0].name", "n__a b"},
		{`{"model":"m","input":"x","tools":[{"type":"custom","name":"p"}],"tool_choice":{"type":"function","name":"p"}}`, "tool_choice.name", "not among the tools"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"what is in this image?"},{"type":"input_image","image_url":"https://example.com/a.jpg"}]}]}`, "input[0].content[1]", "input_image"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-1"}]}]}`, "input[0].content[0]", "input_file"},
		{`{"model":"m","input":[{"type":"web_search_call","id":"ws_1","status":"completed"}]}`, "input[0].type", "web_search_call"},
		{`{"model":"m","input":[{"role":"critic","content":"x"}]}`, "input[0].role", "critic"},
		{`{"model":"m","input":"x","background":true}`, "background", "background"},
		{`{"model":"m","input":"x","conversation":"conv_1"}`, "conversation", "conversation"},
		{`{"model":"m","input":"x","prompt":{"id":"pmpt_1"}}`, "prompt", "prompt"},
		{`{"model":"m","input":"x","reasoning":{"effort":"extreme"}}`, "reasoning.effort", "extreme"},
		{`{"model":"m","input":"x","text":{"format":{"type":"yaml"}}}`, "text.format.type", "yaml"},
		{`{"model":"m","input":"x","tool_choice":"required"}`, "tool_choice", "needs tools"},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"a b"}]}`, "tools[0].name", "tools[0].name"},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":[1]}]}`, "tools[0].parameters", "JSON Schema"},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, "tool_choice.name", "not among the tools"},
		{`{"model":"m","input":"x","temperature":3}`, "temperature", "temperature"},
		{`{"model":"m","input":"x","max_output_tokens":0}`, "max_output_tokens", "max_output_tokens"},
		{`{"model":"m"}`, "input", "input"},
		{`{"model":"m","input":[]}`, "input", "input"},
	}
	for _, tc := range cases {
		w := post(t, s, "/v1/responses", tc.body)
		e := decodeError(t, w)
		if w.Code != 400 || e.Error.Param == nil || *e.Error.Param != tc.param || !strings.Contains(e.Error.Message, tc.says) {
			t.Errorf("%s: status %d, %s", tc.body, w.Code, w.Body)
		}
	}
	// What Codex sends besides the basic fields.
	w := post(t, s, "/v1/responses", `{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],
		"tools":[],"tool_choice":"auto","parallel_tool_calls":false,"reasoning":{"effort":"medium","summary":"auto"},"store":false,"stream":false,
		"include":["reasoning.encrypted_content"],"prompt_cache_key":"019a-uuid","client_metadata":{"x":"y"},"service_tier":"auto",
		"truncation":"auto","safety_identifier":"h","text":{"verbosity":"low"},"stream_options":{"include_obfuscation":false}}`)
	if w.Code != 200 {
		t.Fatalf("Codex's fields: status %d: %s", w.Code, w.Body)
	}
}

// TestResponsesClientGone: a client that leaves a stream stops the
// generation (the model sees the request's context end).
func TestResponsesClientGone(t *testing.T) {
	s, m := respServer(t, nil, ResponseStoreConfig{})
	cancelled := make(chan struct{})
	m.generate = func(ctx context.Context, _ backends.Request) <-chan backends.Event {
		out := make(chan backends.Event)
		go func() {
			defer close(out)
			out <- backends.Event{Token: 1, Text: "Once"}
			<-ctx.Done()
			close(cancelled)
			out <- backends.Event{Token: -1, Done: true, Finish: backends.FinishCancelled}
		}()
		return out
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","input":"story","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before the first delta: %v", err)
		}
		if strings.Contains(line, `"delta":"Once"`) {
			break
		}
	}
	resp.Body.Close() // the client goes away
	<-cancelled
	_, _ = io.Copy(io.Discard, r)
}

// FuzzResponsesRequest: any body either plans or is a 400 in the API's
// error type; nothing panics, with or without a stored conversation.
func FuzzResponsesRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"hi","instructions":"x","max_output_tokens":5,"temperature":0.5,"top_p":0.9}`,
		`{"model":"m","input":[{"role":"developer","content":[{"type":"input_text","text":"a"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"x"}]}`,
		`{"model":"m","input":[{"type":"reasoning","summary":[]},{"role":"user","content":[{"type":"input_image"}]}],"tools":[{"type":"web_search"}]}`,
		`{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":false}`,
		`{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"a","schema":{"type":"object"}}},"reasoning":{"effort":"low","summary":"auto"}}`,
		`{"input":[]}`, `{"input":null}`, `{"input":[1]}`, `{"input":[{"type":"function_call","arguments":{}}]}`, `[]`, `{`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	prev := &storedResponse{id: "resp_1", history: []backends.Message{{Role: "user", Content: "a"}, {Role: "assistant", ToolCalls: []backends.ToolCall{{ID: "c", Name: "f"}}}}}
	f.Fuzz(func(t *testing.T, body []byte, continued bool) {
		var req ResponsesRequest
		if err := unmarshalBody(body, &req); err != nil {
			return
		}
		p := prev
		if !continued {
			p = nil
		}
		plan, err := req.plan(p, planEnv{contextCap: 4096, constraints: testConstraints})
		if err != nil {
			e, ok := err.(*Error)
			if !ok || e.Status != 400 || e.Message == "" {
				t.Fatalf("%s: %#v", body, err)
			}
			return
		}
		if plan.chat == nil || len(plan.chat.msgs) == 0 {
			t.Fatalf("%s: a plan without messages", body)
		}
	})
}

// TestResponsesMixedOutput: text, then two calls, are three output items in
// order (a message, then one function_call per call), each opened and
// closed in the stream before the next begins; the stream's final response
// has the same items as the answer returned whole.
func TestResponsesMixedOutput(t *testing.T) {
	s, _ := respServer(t, func(backends.Request) []backends.Event {
		return []backends.Event{
			{Token: 1, Text: "Checking."},
			{Token: 2, ToolCalls: []backends.ToolCallDelta{{Index: 0, ID: "call_1", Name: "a", Arguments: `{"x":1}`}}},
			{Token: 3, ToolCalls: []backends.ToolCallDelta{{Index: 1, ID: "call_2", Name: "b"}}},
			{Token: 4, ToolCalls: []backends.ToolCallDelta{{Index: 1, Arguments: `{}`}}},
			{Token: -1, Done: true, Finish: backends.FinishToolCalls, Usage: backends.Usage{CompletionTokens: 4}},
		}
	}, ResponseStoreConfig{})
	body := `{"model":"m","input":"x","tools":[{"type":"function","name":"a"},{"type":"function","name":"b"}]}`
	whole := decodeObject(t, post(t, s, "/v1/responses", body))
	shape := func(r any) []string {
		var out []string
		for i := range len(get(r, "output").([]any)) {
			it := get(r, "output", i)
			out = append(out, fmt.Sprintln(get(it, "type"), get(it, "content", 0, "text"), get(it, "call_id"), get(it, "name"), get(it, "arguments"), get(it, "status")))
		}
		return out
	}
	want := []string{"message Checking. <nil> <nil> <nil> completed\n", "function_call <nil> call_1 a {\"x\":1} completed\n", "function_call <nil> call_2 b {} completed\n"}
	if got := shape(whole); !reflect.DeepEqual(got, want) {
		t.Fatalf("output:\n got %q\nwant %q", got, want)
	}
	evs := readResponseEvents(t, post(t, s, "/v1/responses", strings.Replace(body, `"input"`, `"stream":true,"input"`, 1)).Body.String())
	open := -1
	for _, e := range evs {
		switch e.name {
		case "response.output_item.added":
			if open != -1 {
				t.Fatalf("item %v added while item %d is open", e.data["output_index"], open)
			}
			open = int(e.data["output_index"].(float64))
		case "response.output_item.done":
			if int(e.data["output_index"].(float64)) != open {
				t.Fatalf("item %v done while item %d is open", e.data["output_index"], open)
			}
			open = -1
		}
	}
	if got := shape(evs[len(evs)-1].data["response"]); !reflect.DeepEqual(got, want) {
		t.Fatalf("streamed output:\n got %q\nwant %q", got, want)
	}
}
