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
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/responses"
	"github.com/modeld/modeld/backends"
)

// TestResponsesReasoning: a reasoning model's reasoning is a reasoning
// output item before the message, its text a reasoning_text content part
// (and the summary when reasoning.summary asks for one); streamed as
// reasoning_text deltas; its tokens are usage's reasoning_tokens.
// reasoning.effort sets the template's enable_thinking.
func TestResponsesReasoning(t *testing.T) {
	s, m := respServer(t, reasoningReply, responses.ResponseStoreConfig{})
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
	}, responses.ResponseStoreConfig{})
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
	}, responses.ResponseStoreConfig{})
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
	s, m := respServer(t, echoReply, responses.ResponseStoreConfig{})
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
	s, _ := respServer(t, echoReply, responses.ResponseStoreConfig{})
	cases := []struct{ body, param, says string }{
		{`{"model":"m","input":"x","tool_choice":{"type":"web_search_preview"}}`, "tool_choice", "web_search_preview"},
		{`{"model":"m","input":"x","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}}`, "tool_choice", "web_search"},
		{`{"model":"m","input":"x","tools":[{"type":"custom","name":"p","format":{"type":"grammar","syntax":"ebnf","definition":"x"}}]}`, "tools[0].format.syntax", "ebnf"},
		{`{"model":"m","input":"x","tools":[{"type":"custom","name":"p","format":{"type":"yaml"}}]}`, "tools[0].format.type", "yaml"},
		{`{"model":"m","input":"x","tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"a b"}]}]}`, "tools[0].tools[0].name", "n__a b"},
		{`{"model":"m","input":"x","tools":[{"type":"custom","name":"p"}],"tool_choice":{"type":"function","name":"p"}}`, "tool_choice.name", "not among the tools"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"what is in this image?"},{"type":"input_image","image_url":"https://example.com/a.jpg"}]}]}`, "input", "not fetched"},
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
	s, m := respServer(t, nil, responses.ResponseStoreConfig{})
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
	prev := &responses.StoredResponse{ID: "resp_1", History: []backends.Message{{Role: "user", Content: "a"}, {Role: "assistant", ToolCalls: []backends.ToolCall{{ID: "c", Name: "f"}}}}}
	f.Fuzz(func(t *testing.T, body []byte, continued bool) {
		var req responses.ResponsesRequest
		if err := core.UnmarshalBody(body, &req); err != nil {
			return
		}
		p := prev
		if !continued {
			p = nil
		}
		plan, err := req.Plan(p, core.PlanEnv{ContextCap: 4096, Constraints: testConstraints})
		if err != nil {
			e, ok := err.(*core.Error)
			if !ok || e.Status != 400 || e.Message == "" {
				t.Fatalf("%s: %#v", body, err)
			}
			return
		}
		if plan.Chat == nil || len(plan.Chat.Msgs) == 0 {
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
	}, responses.ResponseStoreConfig{})
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
