package api

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/modeld/modeld/api/core"
	apiopenai "github.com/modeld/modeld/api/openai"
	"github.com/modeld/modeld/backends"
)

// toolReply is what the tools test backend generates: some content, then
// a get_weather call whose arguments arrive in three pieces.
func toolReply(req backends.Request) []backends.Event {
	if req.Messages[len(req.Messages)-1].Content == "two" { // two calls
		return []backends.Event{
			{Token: 1, ToolCalls: []backends.ToolCallDelta{{Index: 0, ID: "call_a", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
			{Token: 2, ToolCalls: []backends.ToolCallDelta{{Index: 1, ID: "call_b", Name: "get_weather"}}},
			{Token: 3, ToolCalls: []backends.ToolCallDelta{{Index: 1, Arguments: `{"city":"Rome"}`}}},
			{Token: -1, Done: true, Finish: backends.FinishToolCalls},
		}
	}
	return []backends.Event{
		{Token: 1, Text: "Checking."},
		{Token: 2, ToolCalls: []backends.ToolCallDelta{{Index: 0, ID: "call_abc", Name: "get_weather"}}},
		{Token: 3, ToolCalls: []backends.ToolCallDelta{{Index: 0, Arguments: `{"city":`}}},
		{Token: 4, ToolCalls: []backends.ToolCallDelta{{Index: 0, Arguments: ` "Paris"`}}},
		{Token: 5, ToolCalls: []backends.ToolCallDelta{{Index: 0, Arguments: `}`}}},
		{Token: -1, Done: true, Finish: backends.FinishToolCalls, Usage: backends.Usage{PromptTokens: 9, CompletionTokens: 6}},
	}
}

var registerTools = sync.OnceValue(func() chan backends.Request {
	got := make(chan backends.Request, 8)
	backends.Register("fake-tools", func(_ context.Context, _ backends.LoadSpec) (backends.Model, error) {
		return &fakeModel{got: got, reply: toolReply}, nil
	})
	return got
})

// toolServer is a Server whose every model is the tools test backend.
func toolServer(t *testing.T) (*Server, chan backends.Request) {
	got := registerTools()
	s, _ := backendServer(t, "fake-tools")
	return s, got
}

const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}`

// TestToolCallsWire: a backend's tool-call deltas become message.tool_calls
// (id, type function, name, arguments joined) with finish_reason
// tool_calls, and streamed tool_calls deltas that the official SDK's
// accumulator reassembles to the same call.
func TestToolCallsWire(t *testing.T) {
	s, got := toolServer(t)
	w := post(t, s, "/v1/chat/completions", `{"model":"fake","messages":[{"role":"user","content":"weather?"}],"tools":[`+weatherTool+`]}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	<-got
	var cc struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID, Type string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &cc); err != nil {
		t.Fatal(err)
	}
	ch := cc.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content == nil || *ch.Message.Content != "Checking." || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("completion = %s", w.Body)
	}
	call := ch.Message.ToolCalls[0]
	if call.ID != "call_abc" || call.Type != "function" || call.Function.Name != "get_weather" || call.Function.Arguments != `{"city": "Paris"}` {
		t.Fatalf("tool call = %+v", call)
	}

	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:    "fake",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object"}})},
	}
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	finished := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished++
			if tc.Name != "get_weather" || tc.Arguments != call.Function.Arguments || tc.ID != "call_abc" {
				t.Errorf("finished tool call = %+v", tc)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	<-got
	if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "tool_calls" || acc.Choices[0].Message.Content != "Checking." {
		t.Fatalf("accumulated = %+v", acc.Choices)
	}
	tcs := acc.Choices[0].Message.ToolCalls
	if len(tcs) != 1 || tcs[0].ID != "call_abc" || tcs[0].Type != "function" || tcs[0].Function.Name != "get_weather" || tcs[0].Function.Arguments != call.Function.Arguments {
		t.Fatalf("accumulated tool calls = %+v", tcs)
	}
	if finished != 1 {
		t.Errorf("%d tool calls finished in the stream, want 1", finished)
	}
}

// TestToolCallsContentNull: with calls and no content, content is null.
func TestToolCallsContentNull(t *testing.T) {
	calls := core.AddToolDeltas(nil, []backends.ToolCallDelta{{Index: 0, ID: "a", Name: "f"}, {Index: 0, Arguments: "{}"}, {Index: 1, ID: "b", Name: "g"}})
	if len(calls) != 2 || calls[0].Function.Arguments != "{}" || calls[1].ID != "b" || calls[1].Type != "function" {
		t.Fatalf("calls = %+v", calls)
	}
	b, _ := json.Marshal(apiopenai.AssistantMessage{Role: "assistant", ToolCalls: calls})
	if !strings.Contains(string(b), `"content":null`) || !strings.Contains(string(b), `"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}`) {
		t.Errorf("message = %s", b)
	}
}

// TestToolRequestMapping: what the backend gets from tools, tool_choice,
// the legacy functions and function_call, and a conversation with an
// assistant's tool calls and the tools' results; tool_choice none sends no
// tools.
func TestToolRequestMapping(t *testing.T) {
	s, got := toolServer(t)
	conv := `"messages":[{"role":"user","content":"weather?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"21 C"},` +
		`{"role":"assistant","function_call":{"name":"get_weather","arguments":"{}"}},` +
		`{"role":"function","name":"get_weather","content":"22 C"}]`
	for _, tc := range []struct {
		name, fields string
		tools        int
		choice       backends.ToolChoice
	}{
		{"tools", `"tools":[` + weatherTool + `],"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false`, 1, backends.ToolChoice{Mode: backends.ToolChoiceFunction, Name: "get_weather", Single: true}},
		{"required", `"tools":[` + weatherTool + `],"tool_choice":"required"`, 1, backends.ToolChoice{Mode: backends.ToolChoiceRequired}},
		{"none", `"tools":[` + weatherTool + `],"tool_choice":"none"`, 0, backends.ToolChoice{Mode: backends.ToolChoiceNone}},
		{"legacy", `"functions":[{"name":"get_weather","parameters":{"type":"object"}}],"function_call":{"name":"get_weather"}`, 1, backends.ToolChoice{Mode: backends.ToolChoiceFunction, Name: "get_weather"}},
		{"legacy none", `"functions":[{"name":"get_weather"}],"function_call":"none"`, 0, backends.ToolChoice{Mode: backends.ToolChoiceNone}},
	} {
		w := post(t, s, "/v1/chat/completions", `{"model":"fake",`+conv+`,`+tc.fields+`}`)
		if w.Code != 200 {
			t.Fatalf("%s: status %d: %s", tc.name, w.Code, w.Body)
		}
		req := <-got
		if (req.ToolChoice.Grammar != "") != (tc.tools > 0) {
			t.Errorf("%s: grammar %q with %d tools", tc.name, req.ToolChoice.Grammar, tc.tools)
		}
		req.ToolChoice.Grammar = ""
		if len(req.Tools) != tc.tools || req.ToolChoice != tc.choice {
			t.Errorf("%s: tools %+v, choice %+v; want %d tools, %+v", tc.name, req.Tools, req.ToolChoice, tc.tools, tc.choice)
		}
		if tc.tools == 1 && (req.Tools[0].Name != "get_weather" || !json.Valid(req.Tools[0].Parameters)) {
			t.Errorf("%s: tool %+v", tc.name, req.Tools[0])
		}
		m := req.Messages
		if len(m) != 5 || len(m[1].ToolCalls) != 1 || m[1].ToolCalls[0] != (backends.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}) ||
			m[2].Role != "tool" || m[2].ToolCallID != "call_1" || m[2].Content != "21 C" ||
			len(m[3].ToolCalls) != 1 || m[3].ToolCalls[0].Name != "get_weather" || m[3].ToolCalls[0].ID == "" ||
			m[4].Role != "tool" || m[4].Name != "get_weather" || m[4].Content != "22 C" {
			t.Errorf("%s: messages %+v", tc.name, m)
		}
	}
}

// TestToolValidation: malformed tool definitions and choices are 400s
// naming the field, found before any model is acquired (the server has no
// model runtime, which would be a 503).
func TestToolValidation(t *testing.T) {
	s := New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t)})
	msgs := `"model":"m","messages":[{"role":"user","content":"x"}]`
	for _, tc := range []struct{ fields, param, want string }{
		{`"tools":[{"type":"function","function":{"name":"get weather"}}]`, "tools[0].function.name", "must be 1 to 64 letters"},
		{`"tools":[{"type":"function","function":{"name":"` + strings.Repeat("a", 65) + `"}}]`, "tools[0].function.name", "must be 1 to 64"},
		{`"tools":[` + weatherTool + `,` + weatherTool + `]`, "tools[1].function.name", "defined twice"},
		{`"tools":[{"type":"function","function":{"name":"f","parameters":"object"}}]`, "tools[0].function.parameters", "JSON Schema object"},
		{`"tools":[{"type":"retrieval"}]`, "tools[0]", "must be"},
		// A refused tool keeps the next one's index.
		{`"tools":[{"type":"retrieval"},{"type":"function","function":{"name":"get weather"}}]`, "tools[0]", `tools[1].function.name "get weather" must be`},
		{`"tools":[` + weatherTool + `],"tool_choice":{"type":"function","function":{"name":"other"}}`, "tool_choice", "not among the tools"},
		{`"tool_choice":"required"`, "tool_choice", "needs tools"},
		{`"tools":[` + weatherTool + `],"tool_choice":"sometimes"`, "tool_choice", "not one of auto"},
		{`"functions":[{"name":"f","parameters":[]}]`, "functions[0].parameters", "JSON Schema object"},
		{`"functions":[{"name":"f"}],"tools":[` + weatherTool + `]`, "functions", "not both"},
		{`"functions":[{"name":"f"}],"function_call":7`, "function_call", "auto, none or {name}"},
		{`"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}]`, "messages[0].tool_calls[0]", "must be"},
		{`"parallel_tool_calls":"yes"`, "parallel_tool_calls", ""},
	} {
		body := `{` + msgs + `,` + tc.fields + `}`
		if strings.HasPrefix(tc.fields, `"messages"`) {
			body = `{"model":"m",` + tc.fields + `}`
		}
		w := post(t, s, "/v1/chat/completions", body)
		e := decodeError(t, w)
		if w.Code != 400 || e.Error.Param == nil || *e.Error.Param != tc.param || !strings.Contains(e.Error.Message, tc.want) {
			t.Errorf("%s: %d %s, want 400 param %s with %q", tc.fields, w.Code, w.Body, tc.param, tc.want)
		}
	}
}

// TestParallelToolCallsFalse: with parallel_tool_calls false only the first
// call is returned (the model's further calls are dropped); by default
// every call is.
func TestParallelToolCallsFalse(t *testing.T) {
	s, got := toolServer(t)
	for _, tc := range []struct {
		fields string
		calls  int
	}{{``, 2}, {`,"parallel_tool_calls":true`, 2}, {`,"parallel_tool_calls":false`, 1}} {
		for _, stream := range []bool{false, true} {
			body := `{"model":"fake","messages":[{"role":"user","content":"two"}],"tools":[` + weatherTool + `]` + tc.fields
			if stream {
				body += `,"stream":true`
			}
			w := post(t, s, "/v1/chat/completions", body+`}`)
			<-got
			var calls []core.WireToolCall
			if stream {
				for _, data := range readSSE(t, w.Body.String()) {
					var ch apiopenai.ChatCompletionChunk
					if data == "[DONE]" || json.Unmarshal([]byte(data), &ch) != nil || len(ch.Choices) == 0 {
						continue
					}
					for _, d := range ch.Choices[0].Delta.ToolCalls {
						calls = core.AddToolDeltas(calls, []backends.ToolCallDelta{{Index: d.Index, ID: d.ID, Name: d.Function.Name, Arguments: d.Function.Arguments}})
					}
				}
			} else {
				var cc struct {
					Choices []struct {
						Message apiopenai.AssistantMessage `json:"message"`
					} `json:"choices"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &cc); err != nil || len(cc.Choices) != 1 {
					t.Fatalf("%s: %s", body, w.Body)
				}
				calls = cc.Choices[0].Message.ToolCalls
			}
			if len(calls) != tc.calls || calls[0].ID != "call_a" || calls[0].Function.Arguments != `{"city":"Paris"}` ||
				tc.calls == 2 && (calls[1].ID != "call_b" || calls[1].Function.Arguments != `{"city":"Rome"}`) {
				t.Errorf("%s (stream %v): calls %+v, want %d", tc.fields, stream, calls, tc.calls)
			}
		}
	}
}

// TestToolSchemaRefusedBeforeLoad: under tool_choice required a tool whose
// parameters use a keyword the grammar cannot enforce is a 400 on tools
// naming the tool, the keyword and where it is, and no request reaches the
// model. Under auto (the choice agent CLIs send) the request is served with
// that tool's calls held to a JSON object by the grammar, never unconstrained.
func TestToolSchemaRefusedBeforeLoad(t *testing.T) {
	s, got := toolServer(t)
	bad := `{"type":"function","function":{"name":"scan","parameters":{"type":"object","patternProperties":{"^x":{}}}}}`
	nested := `{"type":"function","function":{"name":"scan","parameters":{"type":"object","properties":{"q":{"type":"string","not":{"const":"x"}}}}}}`
	for _, tool := range []string{bad, nested} {
		w := post(t, s, "/v1/chat/completions", `{"model":"fake","messages":[{"role":"user","content":"hi"}],"tools":[`+tool+`],"tool_choice":"required"}`)
		e := decodeError(t, w)
		if w.Code != 400 || e.Error.Param == nil || *e.Error.Param != "tools" || !strings.Contains(e.Error.Message, `"scan"`) {
			t.Fatalf("required: status %d: %s", w.Code, w.Body)
		}
		if tool == bad && !strings.Contains(e.Error.Message, "patternProperties") {
			t.Errorf("the error does not name the keyword: %s", e.Error.Message)
		}
		if tool == nested && !strings.Contains(e.Error.Message, "/properties/q") {
			t.Errorf("the error does not say where the keyword is: %s", e.Error.Message)
		}
	}
	select {
	case req := <-got:
		t.Fatalf("the model got a request: %+v", req)
	default:
	}
	for _, choice := range []string{``, `,"tool_choice":"auto"`} {
		for _, tool := range []string{bad, nested} {
			w := post(t, s, "/v1/chat/completions", `{"model":"fake","messages":[{"role":"user","content":"hi"}],"tools":[`+tool+`]`+choice+`}`)
			if w.Code != 200 {
				t.Fatalf("auto (%s): status %d: %s", choice, w.Code, w.Body)
			}
			select {
			case req := <-got:
				if g := req.ToolChoice.Grammar; g == "" || !strings.Contains(g, "scan") {
					t.Fatalf("auto (%s): the calls are not under a grammar: %q", choice, g)
				}
			default:
				t.Fatalf("auto (%s): the model got no request", choice)
			}
		}
	}
}
