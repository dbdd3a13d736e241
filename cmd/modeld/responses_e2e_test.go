package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestResponsesSDKAgainstDaemon: the official openai npm SDK's Responses
// API (clients/responses.mjs) against a daemon and its runner, on a
// random-weight model with Qwen2.5's real vocabulary and template:
// responses.create and the stream helper's final response give the same
// greedy text, status and usage (the SDK assembles the stream from the
// Responses event sequence, whose deltas join to the text), and its input
// tokens are the prompt /v1/tokenize counts; tool_choice naming the
// function gives a function_call whose arguments the schema accepts (only
// the grammar makes random weights write them), the same streamed; its
// function_call_output sent back through previous_response_id is a longer
// prompt (the stored conversation is prepended); responses.parse with a
// zod text format gives output_parsed that validates; a deleted, a store
// false and an unknown response are the SDK's NotFoundError. On a model
// whose template opens the thinking block (DeepSeek R1's distill), the
// reasoning is a reasoning item (its summary the same text), created and
// streamed (reasoning_text deltas) alike, counted as reasoning_tokens. A
// request shaped as Codex sends it (include, prompt_cache_key,
// client_metadata, store false, reasoning) streams to its end (the script
// checks it).
func TestResponsesSDKAgainstDaemon(t *testing.T) {
	_, base := realDaemon(t, []realModel{qwenModel, r1Model}, "--context-size", "2048")
	type usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	}
	type reply struct {
		Text   string   `json:"text"`
		Deltas string   `json:"deltas"`
		Status string   `json:"status"`
		Usage  usage    `json:"usage"`
		Events []string `json:"events"`
	}
	type notFound struct {
		Thrown        bool   `json:"thrown"`
		NotFoundError bool   `json:"not_found_error"`
		Status        int    `json:"status"`
		Message       string `json:"message"`
	}
	var got struct {
		Create, Stream reply
		Call           struct {
			Name              string `json:"name"`
			Arguments         string `json:"arguments"`
			Status            string `json:"status"`
			InputTokens       int    `json:"input_tokens"`
			StreamedArguments string `json:"streamed_arguments"`
		}
		Result struct {
			Status      string `json:"status"`
			Previous    bool   `json:"previous"`
			InputTokens int    `json:"input_tokens"`
		}
		Parsed    json.RawMessage `json:"parsed"`
		Deleted   notFound        `json:"deleted"`
		Unstored  notFound        `json:"unstored"`
		NotFound  notFound        `json:"not_found"`
		Reasoning *struct {
			Create, Stream *struct {
				Text    string `json:"text"`
				Summary string `json:"summary"`
				Status  string `json:"status"`
			}
			Deltas          string `json:"deltas"`
			Status          string `json:"status"`
			ReasoningTokens int    `json:"reasoning_tokens"`
			OutputTokens    int    `json:"output_tokens"`
		}
	}
	out := runClient(t, base, "responses.mjs", map[string]string{"MODEL": "t/qwen", "THINK_MODEL": "t/r1"})
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}

	c, s := got.Create, got.Stream
	if c.Text == "" || c.Text != s.Text || s.Deltas != s.Text || c.Status != s.Status || c.Usage != s.Usage ||
		c.Usage.TotalTokens != c.Usage.InputTokens+c.Usage.OutputTokens {
		t.Errorf("create %+v, stream %+v: want the same text, status and usage", c, s)
	}
	if c.Status != "completed" && c.Status != "incomplete" || c.Status == "incomplete" && c.Usage.OutputTokens != 8 {
		t.Errorf("status %q with %d output tokens (max_output_tokens 8)", c.Status, c.Usage.OutputTokens)
	}
	// a Responses request without reasoning renders with enable_thinking false
	counted := tokenizeIDs(t, base, map[string]any{"model": "t/qwen", "messages": []map[string]any{
		{"role": "user", "content": "Tell me a three sentence bedtime story about a unicorn."}},
		"chat_template_kwargs": map[string]any{"enable_thinking": false}})
	if c.Usage.InputTokens != len(counted) {
		t.Errorf("input_tokens %d, /v1/tokenize counts %d", c.Usage.InputTokens, len(counted))
	}
	ev := s.Events
	if len(ev) < 4 || ev[0] != "response.created" || ev[1] != "response.in_progress" || ev[len(ev)-1] != "response."+s.Status ||
		!slices.Contains(ev, "response.output_text.delta") || !slices.Contains(ev, "response.output_item.done") {
		t.Errorf("events %v", ev)
	}

	v := compileSchema(t, `{"type":"object","properties":{"city":{"type":"string","maxLength":8},"unit":{"type":"string","enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}`)
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(got.Call.Arguments))
	if err != nil || got.Call.Name != "get_weather" || got.Call.Status != "completed" {
		t.Fatalf("call %+v: %v", got.Call, err)
	}
	if err := v.Validate(inst); err != nil {
		t.Fatalf("arguments %q fail the schema: %v", got.Call.Arguments, err)
	}
	if got.Call.StreamedArguments != got.Call.Arguments {
		t.Errorf("streamed arguments %q, not streamed %q", got.Call.StreamedArguments, got.Call.Arguments)
	}
	if !got.Result.Previous || got.Result.InputTokens <= got.Call.InputTokens {
		t.Errorf("function_call_output through previous_response_id: %+v; the first turn's prompt had %d tokens", got.Result, got.Call.InputTokens)
	}

	pv := compileSchema(t, `{"type":"object","properties":{"name":{"type":"string","maxLength":8},"day":{"enum":["friday","saturday"]}},"required":["name","day"]}`)
	pinst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(got.Parsed)))
	if err != nil {
		t.Fatalf("parsed %s: %v", got.Parsed, err)
	}
	if err := pv.Validate(pinst); err != nil {
		t.Errorf("output_parsed %s fails the schema: %v", got.Parsed, err)
	}

	r := got.Reasoning
	if r == nil || r.Create == nil || r.Stream == nil || r.Create.Text == "" || *r.Create != *r.Stream || r.Deltas != r.Create.Text ||
		r.Create.Summary != r.Create.Text || r.Status != "incomplete" || r.Create.Status != "incomplete" ||
		r.ReasoningTokens == 0 || r.ReasoningTokens > r.OutputTokens {
		t.Errorf("reasoning: %+v", r)
		if r != nil {
			t.Logf("create %+v, stream %+v", r.Create, r.Stream)
		}
	}

	for what, nf := range map[string]notFound{"deleted": got.Deleted, "store false": got.Unstored, "unknown previous_response_id": got.NotFound} {
		if !nf.Thrown || !nf.NotFoundError || nf.Status != 404 {
			t.Errorf("%s: %+v, want the SDK's NotFoundError", what, nf)
		}
	}
	if !strings.Contains(got.NotFound.Message, "resp_0123456789abcdef") {
		t.Errorf("unknown previous_response_id: message %q does not name the id", got.NotFound.Message)
	}
}

func compileSchema(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://s.json", doc); err != nil {
		t.Fatal(err)
	}
	v, err := c.Compile("mem://s.json")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestResponsesStoreSettings: the store's size, entry count and lifetime
// are settings (flag, environment, file); a size of 0 keeps none, "auto" is
// refused (a store has no machine-derived size), and so are an entry count
// and a lifetime of 0. A daemon started with --responses-store-entries 1
// keeps only the newest response.
func TestResponsesStoreSettings(t *testing.T) {
	load := func(env map[string]string) (Config, error) {
		env["MODELD_HOME"] = t.TempDir()
		return loadConfig(flags(t), envOf(env))
	}
	cfg, err := load(map[string]string{})
	if err != nil || cfg.ResponsesStoreSize != 64<<20 || cfg.ResponsesStoreEntries != 1024 || cfg.ResponsesStoreLifetime.String() != "1h0m0s" {
		t.Fatalf("defaults: %d %d %v %v", cfg.ResponsesStoreSize, cfg.ResponsesStoreEntries, cfg.ResponsesStoreLifetime, err)
	}
	cfg, err = load(map[string]string{"MODELD_RESPONSES_STORE_SIZE": "0", "MODELD_RESPONSES_STORE_ENTRIES": "2", "MODELD_RESPONSES_STORE_LIFETIME": "10m"})
	if err != nil || cfg.ResponsesStoreSize != 0 || cfg.ResponsesStoreEntries != 2 || cfg.ResponsesStoreLifetime.String() != "10m0s" {
		t.Fatalf("0, 2 and 10m: %d %d %v %v", cfg.ResponsesStoreSize, cfg.ResponsesStoreEntries, cfg.ResponsesStoreLifetime, err)
	}
	for k, v := range map[string]string{"MODELD_RESPONSES_STORE_SIZE": "auto", "MODELD_RESPONSES_STORE_LIFETIME": "0",
		"MODELD_RESPONSES_STORE_ENTRIES": "0"} {
		if _, err := load(map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "MODELD_"), "_", "-"))) {
			t.Errorf("%s=%s: %v, want an error naming the setting", k, v, err)
		}
	}

	home := t.TempDir()
	importReal(t, home, qwenModel)
	_, base, logs := startDaemon(t, home, "--context-size", "512", "--responses-store-entries", "1")
	var ids []string
	for range 2 {
		var r struct {
			ID string `json:"id"`
		}
		post(t, base, "/v1/responses", map[string]any{"model": "t/qwen", "input": "hi", "max_output_tokens": 1}, 200, &r)
		ids = append(ids, r.ID)
	}
	for i, want := range []int{404, 200} {
		res, err := http.Get(base + "/v1/responses/" + ids[i])
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET response %d of 2 = %d, want %d (one entry kept)\n%s", i+1, res.StatusCode, want, logs)
		}
	}
}
