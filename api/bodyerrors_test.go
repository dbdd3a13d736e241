package api

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/modeld/modeld/cache"
)

// goTypeRE matches what only Go would write: a qualified type name, a slice
// or map type, an embedded struct's name in a field path.
var goTypeRE = regexp.MustCompile(`\b[a-z]+\.[A-Z]\w*|\[\]|map\[|samplingFields|\bint64\b|\bfloat64\b|\*[a-z]+\.`)

// A body that does not decode is refused in the client's terms: the JSON
// field as the request writes it and the JSON type it wants; a duration
// written without quotes names keep_alive and its forms.
func TestBodyErrorsSpeakJSON(t *testing.T) {
	s := New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: emptyCache(t)})
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct{ path, body, param, want string }{
		{"/v1/chat/completions", `{"model":"m","messages":"hi"}`, "messages", `invalid value for "messages": want an array, got a string`},
		{"/v1/chat/completions", `{"model":"m",` + msgs + `,"temperature":"hot"}`, "temperature", `invalid value for "temperature": want a number, got a string`},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":3,"content":"x"}]}`, "messages.role", `want a string, got a number`},
		{"/v1/chat/completions", `{"model":"m","messages":[7]}`, "messages", `want an object, got a number`},
		{"/v1/completions", `{"model":"m","prompt":"x","max_tokens":"many"}`, "max_tokens", `want an integer, got a string`},
		{"/v1/completions", `{"model":"m","prompt":"x","stream":"yes"}`, "stream", `want true or false, got a string`},
		{"/v1/embeddings", `{"model":7,"input":"x"}`, "model", `want a string, got a number`},
		{"/v1/chat/completions", `{"model":"m",` + msgs + `,"keep_alive": 5m}`, "keep_alive", `a number of seconds`},
		{"/v1/embeddings", `{"model":"m","input":"x","keep_alive":5m}`, "keep_alive", `"5m", in quotes`},
		{"/v1/embeddings", `{"model":"m","input":"x","keep_alive":true}`, "keep_alive", `a duration such as "5m"`},
		{"/v1/chat/completions", `{"model": m}`, "model", `the value of "model" is not valid JSON`},
		{"/v1/chat/completions", `[1]`, "", `must be a JSON object, not an array`},
		{"/v1/chat/completions", `{"model":"m",`, "", `not valid JSON`},
	} {
		w := post(t, s, tc.path, tc.body)
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Param   *string `json:"param"`
			} `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != 400 {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, w.Code, w.Body)
			continue
		}
		param := ""
		if e.Error.Param != nil {
			param = *e.Error.Param
		}
		if param != tc.param || !strings.Contains(e.Error.Message, tc.want) {
			t.Errorf("%s %s: param %q, message %q; want param %q and %q", tc.path, tc.body, param, e.Error.Message, tc.param, tc.want)
		}
		if goTypeRE.MatchString(e.Error.Message) {
			t.Errorf("%s %s: a Go type in %q", tc.path, tc.body, e.Error.Message)
		}
	}
}

// No 400 for a value of the wrong type names a Go type, on any route and
// field tried.
func TestBodyErrorsNameNoGoType(t *testing.T) {
	s := New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: emptyCache(t)})
	fields := []string{"model", "messages", "input", "prompt", "temperature", "top_p", "top_k", "seed", "stop", "max_tokens",
		"stream", "stream_options", "tools", "tool_choice", "response_format", "n", "logit_bias", "documents", "query",
		"candidate_labels", "top_n", "max_new_tokens", "num_beams", "dimensions", "encoding_format", "keep_alive"}
	values := []string{`"x"`, `7`, `true`, `{}`, `[1]`, `{"a":1}`}
	for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/classify", "/v1/rerank", "/v1/summarize", "/v1/tokenize"} {
		for _, f := range fields {
			for _, v := range values {
				w := post(t, s, path, `{"`+f+`":`+v+`}`)
				if w.Code == 400 && goTypeRE.MatchString(w.Body.String()) {
					t.Errorf("%s {%q: %s}: a Go type in %s", path, f, v, w.Body)
				}
			}
		}
	}
}

func emptyCache(t *testing.T) *cache.Cache {
	t.Helper()
	resolve := func(context.Context, string) (cache.Spec, error) { return cache.Spec{}, errNotFound }
	load := func(context.Context, cache.Spec) (cache.Instance, error) { return nil, errNotFound }
	c, err := cache.New(cache.DefaultConfig(), resolve, load)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}
