package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/responses"
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

func respServer(t *testing.T, reply func(backends.Request) []backends.Event, cfg responses.ResponseStoreConfig) (*Server, *respModel) {
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
	s, m := respServer(t, echoReply, responses.ResponseStoreConfig{})
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
	if w.Header().Get(core.DeviceHeader) != "cpu" {
		t.Errorf("device header %q", w.Header().Get(core.DeviceHeader))
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
	s, m := respServer(t, echoReply, responses.ResponseStoreConfig{})
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
	s, m := respServer(t, callReply, responses.ResponseStoreConfig{})
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
	s, _ := respServer(t, echoReply, responses.ResponseStoreConfig{})
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
	s, _ := respServer(t, callReply, responses.ResponseStoreConfig{})
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
