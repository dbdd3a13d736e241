package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/openai"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// TestStructuredOutputCompiled: a json_object or json_schema response
// format leaves the request check with its grammar (the backend's compiler
// ran before any model was acquired); free text has none; a schema the
// compiler refuses is a 400 on response_format naming the keyword.
func TestStructuredOutputCompiled(t *testing.T) {
	cases := []struct {
		body    string
		grammar bool
	}{
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`, true},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}}}`, true},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"text"}}`, false},
		{`{"model":"m","messages":[{"role":"user","content":"x"}]}`, false},
	}
	for _, tc := range cases {
		var req openai.ChatCompletionRequest
		if err := json.Unmarshal([]byte(tc.body), &req); err != nil {
			t.Fatal(err)
		}
		var gen backends.Request
		if err := req.Tooling(&gen, core.PlanEnv{ContextCap: 8192, Constraints: testConstraints}); err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if got := gen.ResponseFormat.Grammar != ""; got != tc.grammar || tc.grammar && !strings.Contains(gen.ResponseFormat.Grammar, "root ::=") {
			t.Errorf("%s: grammar %q", tc.body, gen.ResponseFormat.Grammar)
		}
	}
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"integer","multipleOf":3}}}}`), &req); err != nil {
		t.Fatal(err)
	}
	err := req.Tooling(&backends.Request{}, core.PlanEnv{ContextCap: 8192, Constraints: testConstraints})
	e, ok := err.(*core.Error)
	if !ok || e.Param == nil || *e.Param != "response_format" || !strings.Contains(e.Message, `the keyword "multipleOf" (at the schema's root) is not supported`) {
		t.Fatalf("multipleOf: %#v", err)
	}
}

// TestStructuredOutputCompletions: /v1/completions reads response_format
// too; an unenforceable schema there is the same 400 on response_format.
func TestStructuredOutputCompletions(t *testing.T) {
	s := chatServer(t, map[string]cache.Instance{"m": &fakeChat{template: true, finish: backends.FinishStop}})
	w := post(t, s, "/v1/completions", `{"model":"m","prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"array","uniqueItems":true}}}}`)
	e := decodeError(t, w)
	if w.Code != 400 || e.Error.Param == nil || *e.Error.Param != "response_format" || !strings.Contains(e.Error.Message, `"uniqueItems"`) {
		t.Fatalf("%d %+v", w.Code, e.Error)
	}
	w = post(t, s, "/v1/completions", `{"model":"m","prompt":"x","max_tokens":2,"response_format":{"type":"json_object"}}`)
	if w.Code != 200 {
		t.Fatalf("json_object completion: %d %s", w.Code, w.Body)
	}
}
