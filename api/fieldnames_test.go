package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDialectsNameOnlyTheirFields: a schema the backend cannot enforce, in
// a response format and in a tool, is refused by each dialect in its own
// words: the message names the dialect's field and never another
// dialect's (the backend's error is neutral; no dialect patches another's
// wording).
func TestDialectsNameOnlyTheirFields(t *testing.T) {
	e := ollamaServer(t, "")
	const bad = `{"type":"wizard"}`
	user := `[{"role":"user","content":"x"}]`
	type refusal struct{ name, path, body, own string }
	cases := []refusal{
		{"chat format", "/v1/chat/completions", `{"model":"org/chat","messages":` + user + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + bad + `}}}`, "response_format"},
		{"chat tool", "/v1/chat/completions", `{"model":"org/chat","messages":` + user + `,"tools":[{"type":"function","function":{"name":"f","parameters":` + bad + `}}]}`, "parameters"},
		{"completions format", "/v1/completions", `{"model":"org/chat","prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + bad + `}}}`, "response_format"},
		{"ollama chat format", "/api/chat", `{"model":"org/chat","stream":false,"messages":` + user + `,"format":` + bad + `}`, "format"},
		{"ollama chat tool", "/api/chat", `{"model":"org/chat","stream":false,"messages":` + user + `,"tools":[{"type":"function","function":{"name":"f","parameters":` + bad + `}}]}`, "parameters"},
		{"ollama generate format", "/api/generate", `{"model":"org/chat","stream":false,"prompt":"x","format":` + bad + `}`, "format"},
		{"anthropic format", "/v1/messages", `{"model":"org/chat","max_tokens":5,"messages":` + user + `,"output_config":{"format":{"type":"json_schema","schema":` + bad + `}}}`, "output_config.format"},
		{"anthropic tool", "/v1/messages", `{"model":"org/chat","max_tokens":5,"messages":` + user + `,"tools":[{"name":"f","input_schema":` + bad + `}]}`, "input_schema"},
		{"responses format", "/v1/responses", `{"model":"org/chat","input":"x","text":{"format":{"type":"json_schema","name":"x","schema":` + bad + `}}}`, "text.format"},
		{"responses tool", "/v1/responses", `{"model":"org/chat","input":"x","tools":[{"type":"function","name":"f","parameters":` + bad + `}]}`, "parameters"},
	}
	// The fields only one dialect has.
	dialectOnly := map[string]string{"response_format": "openai", "output_config": "anthropic", "output_format": "anthropic",
		"input_schema": "anthropic", "text.format": "responses"}
	dialectOf := func(path string) string {
		switch {
		case strings.HasPrefix(path, "/api/"):
			return "ollama"
		case path == "/v1/messages":
			return "anthropic"
		case path == "/v1/responses":
			return "responses"
		}
		return "openai"
	}
	for _, tc := range cases {
		w := e.call(t, "POST", tc.path, tc.body)
		if w.Code != 400 {
			t.Errorf("%s: status %d: %s", tc.name, w.Code, w.Body)
			continue
		}
		msg := errorMessage(t, w.Body.Bytes())
		if !strings.Contains(msg, tc.own) || !strings.Contains(msg, "invalid") {
			t.Errorf("%s: %q does not name %s and what is wrong", tc.name, msg, tc.own)
		}
		for field, owner := range dialectOnly {
			if owner != dialectOf(tc.path) && strings.Contains(msg, field) {
				t.Errorf("%s: %q names %s, a field of the %s dialect", tc.name, msg, field, owner)
			}
		}
		if dialectOf(tc.path) == "anthropic" && strings.Contains(msg, "parameters") {
			t.Errorf("%s: %q names OpenAI's parameters", tc.name, msg)
		}
	}
}

// errorMessage is the message of an error body in any dialect's shape:
// {"error": "..."} (Ollama) or {"error": {"message": "..."}} (the others).
func errorMessage(t *testing.T, body []byte) string {
	t.Helper()
	var b struct {
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	var s string
	if json.Unmarshal(b.Error, &s) == nil {
		return s
	}
	var o struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(b.Error, &o); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return o.Message
}
