package api

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/modeld/modeld/api/responses"
	"github.com/modeld/modeld/backends"
)

// The request fixtures are shaped as Codex sends them (field names, item
// and tool types, tool_choice, reasoning), with tool descriptions and a
// patch grammar of modeld's own: testdata/responses/codex-unknown-model.json
// (an id Codex does not know: functions, a namespace group, web_search)
// and codex-catalog-model.json (an id from its catalog: a custom
// apply_patch tool with a Lark grammar, client tool_search, web_search).

func codexFixture(t *testing.T, name string, edit func(map[string]any)) string {
	t.Helper()
	b, err := os.ReadFile("testdata/responses/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	v["stream"] = false
	if edit != nil {
		edit(v)
	}
	b, _ = json.Marshal(v)
	return string(b)
}

func toolNames(tools []backends.Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names
}

// TestResponsesCodexToolArrays: both of Codex's tool arrays are taken; the
// model sees the namespace's functions as namespace__name, the custom tool
// as a freeform function carrying its grammar, tool_search as a function,
// and no web_search.
func TestResponsesCodexToolArrays(t *testing.T) {
	s, m := respServer(t, echoReply, responses.ResponseStoreConfig{})
	w := post(t, s, "/v1/responses", codexFixture(t, "codex-unknown-model.json", nil))
	if w.Code != 200 {
		t.Fatalf("unknown-model fixture: %d %s", w.Code, w.Body)
	}
	want := []string{"exec_command", "write_stdin", "request_user_input", "view_image",
		"multi_agent_v1__close_agent", "multi_agent_v1__resume_agent", "multi_agent_v1__send_input", "multi_agent_v1__spawn_agent", "multi_agent_v1__wait_agent",
		"get_goal", "create_goal", "update_goal"}
	if got := toolNames(m.last(t).Tools); !reflect.DeepEqual(got, want) {
		t.Fatalf("tools the model sees:\n got %v\nwant %v", got, want)
	}
	w = post(t, s, "/v1/responses", codexFixture(t, "codex-catalog-model.json", nil))
	if w.Code != 200 {
		t.Fatalf("catalog fixture: %d %s", w.Code, w.Body)
	}
	req := m.last(t)
	want = []string{"exec_command", "write_stdin", "request_user_input", "apply_patch", "view_image", "get_goal", "create_goal", "update_goal", "tool_search"}
	if got := toolNames(req.Tools); !reflect.DeepEqual(got, want) {
		t.Fatalf("tools the model sees:\n got %v\nwant %v", got, want)
	}
	patch := req.Tools[3]
	if patch.Input == nil || patch.Input.Syntax != "lark" || !strings.HasPrefix(patch.Input.Definition, "\nstart: header section+ footer") ||
		string(patch.Parameters) != string(backends.FreeformParameters) || !strings.Contains(patch.Description, "lark grammar") {
		t.Fatalf("apply_patch as the model sees it: %+v", patch)
	}
	if !strings.Contains(string(req.Tools[8].Parameters), `"query"`) || req.Tools[8].Input != nil {
		t.Fatalf("tool_search as the model sees it: %+v", req.Tools[8])
	}
	// the Responses reasoning field decides: {summary} without an effort is
	// no thinking, effort medium is thinking
	m.mu.Lock()
	vars := slices.Clone(m.vars)
	m.mu.Unlock()
	if len(vars) < 2 || vars[len(vars)-2]["enable_thinking"] != false || vars[len(vars)-1]["enable_thinking"] != true {
		t.Fatalf("template variables: %v", vars)
	}
}

// TestResponsesReasoningAbsentIsNone: with no reasoning field the template
// is told not to think.
func TestResponsesReasoningAbsentIsNone(t *testing.T) {
	s, m := respServer(t, echoReply, responses.ResponseStoreConfig{})
	if w := post(t, s, "/v1/responses", `{"model":"m","input":"hi"}`); w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v := m.vars[len(m.vars)-1]; v["enable_thinking"] != false {
		t.Fatalf("template variables: %v", v)
	}
}

// TestResponsesDroppedTools: hosted and unknown tool types are dropped, not
// refused; the request goes on with the other tools.
func TestResponsesDroppedTools(t *testing.T) {
	s, m := respServer(t, echoReply, responses.ResponseStoreConfig{})
	w := post(t, s, "/v1/responses", `{"model":"m","input":"x","tools":[{"type":"web_search","external_web_access":false},
		{"type":"file_search","vector_store_ids":["vs_1"]},{"type":"code_interpreter","container":{"type":"auto"}},
		{"type":"tool_search","execution":"server"},{"type":"hologram","name":"h"},{"type":"function","name":"f"}]}`)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if got := toolNames(m.last(t).Tools); !reflect.DeepEqual(got, []string{"f"}) {
		t.Fatalf("tools: %v", got)
	}
	// a hosted tool named by tool_choice is refused
	w = post(t, s, "/v1/responses", `{"model":"m","input":"x","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}}`)
	if w.Code != 400 || !strings.Contains(w.Body.String(), "web_search") {
		t.Fatalf("tool_choice web_search: %d %s", w.Code, w.Body)
	}
}

// TestResponsesToolChoiceShapes: the tool_choice forms Codex and the SDKs
// send.
func TestResponsesToolChoiceShapes(t *testing.T) {
	s, m := respServer(t, echoReply, responses.ResponseStoreConfig{})
	for _, c := range []struct {
		choice string
		want   backends.ToolChoice
		tools  []string
	}{
		{`"auto"`, backends.ToolChoice{Mode: backends.ToolChoiceAuto}, nil},
		{`"required"`, backends.ToolChoice{Mode: backends.ToolChoiceRequired}, nil},
		{`{"type":"custom","name":"apply_patch"}`, backends.ToolChoice{Mode: backends.ToolChoiceFunction, Name: "apply_patch"}, nil},
		{`{"type":"function","name":"exec_command"}`, backends.ToolChoice{Mode: backends.ToolChoiceFunction, Name: "exec_command"}, nil},
		{`{"type":"tool_search"}`, backends.ToolChoice{Mode: backends.ToolChoiceFunction, Name: "tool_search"}, nil},
		{`{"type":"allowed_tools","mode":"required","tools":[{"type":"custom","name":"apply_patch"},{"type":"function","name":"view_image"}]}`,
			backends.ToolChoice{Mode: backends.ToolChoiceRequired}, []string{"apply_patch", "view_image"}},
	} {
		body := codexFixture(t, "codex-catalog-model.json", func(v map[string]any) { v["tool_choice"] = json.RawMessage(c.choice) })
		if w := post(t, s, "/v1/responses", body); w.Code != 200 {
			t.Fatalf("%s: %d %s", c.choice, w.Code, w.Body)
		}
		req := m.last(t)
		got := req.ToolChoice
		got.Grammar = ""
		if got != c.want {
			t.Errorf("%s: tool choice %+v, want %+v", c.choice, got, c.want)
		}
		if c.tools != nil && !reflect.DeepEqual(toolNames(req.Tools), c.tools) {
			t.Errorf("%s: tools %v", c.choice, toolNames(req.Tools))
		}
	}
	// a function in a namespace, by its namespace and name
	body := codexFixture(t, "codex-unknown-model.json", func(v map[string]any) {
		v["tool_choice"] = map[string]any{"type": "function", "name": "wait_agent", "namespace": "multi_agent_v1"}
	})
	if w := post(t, s, "/v1/responses", body); w.Code != 200 || m.last(t).ToolChoice.Name != "multi_agent_v1__wait_agent" {
		t.Fatalf("namespaced choice: %d %s %+v", w.Code, w.Body, m.last(t).ToolChoice)
	}
}

// TestResponsesNamespacedCallsRoundTrip: a call of a namespace's function
// goes back as a function_call with name and namespace apart (as Codex
// routes it), and comes back in the next turn's input as the same
// model-facing function.
func TestResponsesNamespacedCallsRoundTrip(t *testing.T) {
	reply := func(backends.Request) []backends.Event {
		return []backends.Event{
			{Token: 1, ToolCalls: []backends.ToolCallDelta{{Index: 0, ID: "call_1", Name: "multi_agent_v1__close_agent"}}},
			{Token: 2, ToolCalls: []backends.ToolCallDelta{{Index: 0, Arguments: `{"target":"a1"}`}}},
			{Token: -1, Done: true, Finish: backends.FinishToolCalls, Usage: backends.Usage{CompletionTokens: 2}},
		}
	}
	s, m := respServer(t, reply, responses.ResponseStoreConfig{})
	r := decodeObject(t, post(t, s, "/v1/responses", codexFixture(t, "codex-unknown-model.json", nil)))
	item := get(r, "output", 0).(map[string]any)
	if item["type"] != "function_call" || item["name"] != "close_agent" || item["namespace"] != "multi_agent_v1" || item["arguments"] != `{"target":"a1"}` {
		t.Fatalf("output: %v", r["output"])
	}
	streamed := readResponseEvents(t, post(t, s, "/v1/responses", codexFixture(t, "codex-unknown-model.json", func(v map[string]any) { v["stream"] = true })).Body.String())
	done := streamed[len(streamed)-1]
	if got := get(done.data, "response", "output", 0); get(got, "name") != "close_agent" || get(got, "namespace") != "multi_agent_v1" {
		t.Fatalf("streamed output: %v", got)
	}
	// the next turn, as Codex sends it
	body := codexFixture(t, "codex-unknown-model.json", func(v map[string]any) {
		v["input"] = append(v["input"].([]any),
			map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "close_agent", "namespace": "multi_agent_v1", "arguments": `{"target":"a1"}`, "status": "completed"},
			map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "closed"})
	})
	if w := post(t, s, "/v1/responses", body); w.Code != 200 {
		t.Fatalf("turn 2: %d %s", w.Code, w.Body)
	}
	msgs := m.last(t).Messages
	call, result := msgs[len(msgs)-2], msgs[len(msgs)-1]
	if len(call.ToolCalls) != 1 || call.ToolCalls[0].Name != "multi_agent_v1__close_agent" || result.Role != "tool" || result.Content != "closed" || result.Name != "multi_agent_v1__close_agent" {
		t.Fatalf("turn 2 as the model sees it: %+v %+v", call, result)
	}
}

// patchText is an input whose JSON form has every escape a patch needs.
const patchText = "=== BEGIN\n=== NEW a \"b\".txt\n+tab\there\\ and é\n=== END\n"

// TestResponsesCustomToolCall: a call of a custom tool is a
// custom_tool_call whose input is the text (not its JSON form), streamed as
// custom_tool_call_input deltas that add up to it, whichever way the
// arguments arrive in pieces; the stream ends with the object returned
// whole; the next turn takes custom_tool_call and custom_tool_call_output.
func TestResponsesCustomToolCall(t *testing.T) {
	args := responses.FreeformArguments(patchText)
	for _, cut := range []int{1, 3, 7} {
		reply := func(backends.Request) []backends.Event {
			evs := []backends.Event{{Token: 1, ToolCalls: []backends.ToolCallDelta{{Index: 0, ID: "call_p", Name: "apply_patch"}}}}
			for i := 0; i < len(args); i += cut {
				evs = append(evs, backends.Event{Token: 2, ToolCalls: []backends.ToolCallDelta{{Index: 0, Arguments: args[i:min(i+cut, len(args))]}}})
			}
			return append(evs, backends.Event{Token: -1, Done: true, Finish: backends.FinishToolCalls, Usage: backends.Usage{CompletionTokens: 9}})
		}
		s, m := respServer(t, reply, responses.ResponseStoreConfig{})
		r := decodeObject(t, post(t, s, "/v1/responses", codexFixture(t, "codex-catalog-model.json", nil)))
		item := get(r, "output", 0).(map[string]any)
		if item["type"] != "custom_tool_call" || item["name"] != "apply_patch" || item["input"] != patchText || item["call_id"] != "call_p" || item["status"] != "completed" {
			t.Fatalf("cut %d: output %v", cut, r["output"])
		}
		evs := readResponseEvents(t, post(t, s, "/v1/responses", codexFixture(t, "codex-catalog-model.json", func(v map[string]any) { v["stream"] = true })).Body.String())
		var deltas strings.Builder
		var doneInput any
		for _, e := range evs {
			switch e.name {
			case "response.custom_tool_call_input.delta":
				deltas.WriteString(e.data["delta"].(string))
			case "response.custom_tool_call_input.done":
				doneInput = e.data["input"]
			case "response.function_call_arguments.delta":
				t.Fatalf("cut %d: a custom call streamed as function arguments", cut)
			}
		}
		if deltas.String() != patchText || doneInput != patchText {
			t.Fatalf("cut %d: deltas %q, done %q", cut, deltas.String(), doneInput)
		}
		final := get(evs[len(evs)-1].data, "response", "output")
		if !reflect.DeepEqual(stripIDs(final), stripIDs(r["output"])) {
			t.Fatalf("cut %d: streamed output %v, whole %v", cut, final, r["output"])
		}
		// turn 2
		body := codexFixture(t, "codex-catalog-model.json", func(v map[string]any) {
			v["input"] = append(v["input"].([]any),
				map[string]any{"type": "custom_tool_call", "id": "ctc_1", "status": "completed", "call_id": "call_p", "name": "apply_patch", "input": patchText},
				map[string]any{"type": "custom_tool_call_output", "call_id": "call_p", "output": "Success. Updated the following files:\nA a.txt\n"})
		})
		if w := post(t, s, "/v1/responses", body); w.Code != 200 {
			t.Fatalf("turn 2: %d %s", w.Code, w.Body)
		}
		msgs := m.last(t).Messages
		call, result := msgs[len(msgs)-2], msgs[len(msgs)-1]
		if len(call.ToolCalls) != 1 || call.ToolCalls[0].Name != "apply_patch" || call.ToolCalls[0].Arguments != args ||
			result.Role != "tool" || result.ToolCallID != "call_p" || !strings.HasPrefix(result.Content, "Success.") {
			t.Fatalf("turn 2 as the model sees it: %+v %+v", call, result)
		}
	}
}

// stripIDs is output items without their generated ids.
func stripIDs(v any) any {
	items, _ := v.([]any)
	var out []any
	for _, it := range items {
		m := map[string]any{}
		for k, x := range it.(map[string]any) {
			if k != "id" {
				m[k] = x
			}
		}
		out = append(out, m)
	}
	return out
}

// TestResponsesToolSearch: a call of the client's tool_search is a
// tool_search_call with its arguments as an object; the tools its
// tool_search_output loads are the model's to call in the next turn.
func TestResponsesToolSearch(t *testing.T) {
	reply := func(backends.Request) []backends.Event {
		return []backends.Event{
			{Token: 1, ToolCalls: []backends.ToolCallDelta{{Index: 0, ID: "call_s", Name: "tool_search"}}},
			{Token: 2, ToolCalls: []backends.ToolCallDelta{{Index: 0, Arguments: `{"query": "agents", "limit": 2}`}}},
			{Token: -1, Done: true, Finish: backends.FinishToolCalls, Usage: backends.Usage{CompletionTokens: 2}},
		}
	}
	s, m := respServer(t, reply, responses.ResponseStoreConfig{})
	r := decodeObject(t, post(t, s, "/v1/responses", codexFixture(t, "codex-catalog-model.json", nil)))
	item := get(r, "output", 0).(map[string]any)
	if item["type"] != "tool_search_call" || item["execution"] != "client" || item["call_id"] != "call_s" ||
		!reflect.DeepEqual(item["arguments"], map[string]any{"query": "agents", "limit": 2.0}) {
		t.Fatalf("output: %v", r["output"])
	}
	body := codexFixture(t, "codex-catalog-model.json", func(v map[string]any) {
		v["input"] = append(v["input"].([]any),
			map[string]any{"type": "tool_search_call", "id": "tsc_1", "call_id": "call_s", "status": "completed", "execution": "client", "arguments": map[string]any{"query": "agents", "limit": 2}},
			map[string]any{"type": "tool_search_output", "id": "tso_1", "call_id": "call_s", "status": "completed", "execution": "client", "tools": []any{
				map[string]any{"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.", "tools": []any{
					map[string]any{"type": "function", "name": "spawn_agent", "description": "Start one.", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}}}}})
	})
	if w := post(t, s, "/v1/responses", body); w.Code != 200 {
		t.Fatalf("turn 2: %d %s", w.Code, w.Body)
	}
	req := m.last(t)
	if names := toolNames(req.Tools); !slices.Contains(names, "multi_agent_v1__spawn_agent") {
		t.Fatalf("tools after the search: %v", names)
	}
	msgs := req.Messages
	call, result := msgs[len(msgs)-2], msgs[len(msgs)-1]
	if len(call.ToolCalls) != 1 || call.ToolCalls[0].Name != "tool_search" || call.ToolCalls[0].Arguments != `{"limit":2,"query":"agents"}` ||
		result.ToolCallID != "call_s" || result.Content != `{"loaded_tools":["multi_agent_v1__spawn_agent"]}` {
		t.Fatalf("turn 2 as the model sees it: %+v %+v", call, result)
	}
	// a call of a loaded tool goes back with its namespace
	m.reply = func(backends.Request) []backends.Event {
		return []backends.Event{
			{Token: 1, ToolCalls: []backends.ToolCallDelta{{Index: 0, ID: "call_2", Name: "multi_agent_v1__spawn_agent", Arguments: `{}`}}},
			{Token: -1, Done: true, Finish: backends.FinishToolCalls},
		}
	}
	r = decodeObject(t, post(t, s, "/v1/responses", body))
	if item := get(r, "output", 0); get(item, "name") != "spawn_agent" || get(item, "namespace") != "multi_agent_v1" {
		t.Fatalf("call of a loaded tool: %v", item)
	}
}

// TestFreeformInputPrefix: the streamed input is decoded only as far as
// complete characters and escapes.
func TestFreeformInputPrefix(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{`{"inp`, ""},
		{`{"input": "ab`, "ab"},
		{`{"input":"a\`, "a"},
		{`{"input":"a\n`, "a\n"},
		{`{"input":"\u00e`, ""},
		{`{"input":"\u00e9x`, "éx"},
		{`{"input":"\ud83d\ude00!`, "😀!"},
		{`{"input":"\ud83d`, ""},
		{`{"input":"done" }`, "done"},
		{"{\"input\":\"\xc3", ""},
	} {
		if got := responses.PartialInput(c.args); got != c.want {
			t.Errorf("partialInput(%q) = %q, want %q", c.args, got, c.want)
		}
	}
	if got := responses.FreeformInput(`not json`); got != "not json" {
		t.Errorf("freeformInput of text that is not the arguments' shape: %q", got)
	}
}

// TestResponsesSeed: seed, modeld's own as on the chat API, reaches the
// sampler.
func TestResponsesSeed(t *testing.T) {
	s, m := respServer(t, echoReply, responses.ResponseStoreConfig{})
	if w := post(t, s, "/v1/responses", `{"model":"m","input":"hi","seed":7,"temperature":1}`); w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if seed := m.last(t).Sampling.Seed; seed == nil || *seed != 7 {
		t.Fatalf("sampling seed %v", seed)
	}
}
