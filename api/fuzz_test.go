package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/openai"
	"github.com/modeld/modeld/api/tasks"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/models/hub"
)

// Request routes whose body FuzzDecodeRequest decodes and validates, as their
// handlers do before acquiring a model.
var fuzzRoutes = []struct {
	name   string
	decode func(body []byte) error
}{
	{"chat", func(b []byte) error {
		var r openai.ChatCompletionRequest
		if err := core.UnmarshalBody(b, &r); err != nil {
			return err
		}
		_, err := r.Plan(core.PlanEnv{ContextCap: backends.DefaultContextCap})
		return err
	}},
	{"completions", func(b []byte) error {
		var r openai.CompletionRequest
		if err := core.UnmarshalBody(b, &r); err != nil {
			return err
		}
		_, err := r.Plan(core.PlanEnv{ContextCap: backends.DefaultContextCap})
		return err
	}},
	{"embeddings", func(b []byte) error {
		var r openai.EmbeddingRequest
		if err := core.UnmarshalBody(b, &r); err != nil {
			return err
		}
		_, _, err := r.EmbedOptions()
		return err
	}},
	{"classify", func(b []byte) error {
		var r tasks.ClassifyRequest
		if err := core.UnmarshalBody(b, &r); err != nil {
			return err
		}
		_, err := r.Plan()
		return err
	}},
	{"rerank", func(b []byte) error {
		var r tasks.RerankRequest
		if err := core.UnmarshalBody(b, &r); err != nil {
			return err
		}
		_, _, _, err := r.Validate()
		return err
	}},
	{"summarize", func(b []byte) error {
		var r tasks.SummarizeRequest
		if err := core.UnmarshalBody(b, &r); err != nil {
			return err
		}
		_, _, err := r.Options()
		return err
	}},
	{"unload", func(b []byte) error {
		var r UnloadRequest
		return core.UnmarshalBody(b, &r)
	}},
}

// checkRequestError asserts what every refusal of a request must be: an
// *Error with a 4xx status, a message of bounded size, and a body that
// encodes to one JSON object.
func checkRequestError(t *testing.T, what string, err error) {
	t.Helper()
	var ae *core.Error
	if !errors.As(err, &ae) {
		t.Fatalf("%s: error %T %v is not an *api.Error", what, err, err)
	}
	if ae.Status < 400 || ae.Status > 499 || ae.Message == "" || ae.Type == "" {
		t.Fatalf("%s: refusal %+v", what, ae)
	}
	e := core.ToAPIError(err)
	if len(e.Message) > core.MaxErrorMessage+8 {
		t.Fatalf("%s: message of %d bytes", what, len(e.Message))
	}
	if _, err := json.Marshal(gin.H{"error": e}); err != nil {
		t.Fatalf("%s: error does not encode: %v", what, err)
	}
}

// FuzzDecodeRequest: decoding and validating any body of any inference or
// unload route never panics, and a refusal is a proper 4xx *Error.
func FuzzDecodeRequest(f *testing.F) {
	seeds := []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":["a","b"],"logit_bias":{"1":-100},"max_tokens":5}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url"}]}],"tools":[],"tool_choice":"none"}`,
		`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1"}]},{"role":"tool","tool_call_id":"1","content":"x"}]}`,
		`{"model":"m","prompt":["one"],"max_tokens":1,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","prompt":"x","keep_alive":"5m","seed":1,"temperature":0.5,"top_p":0.9,"top_k":4,"min_p":0.1}`,
		`{"model":"m","input":["a","b"],"encoding_format":"base64","dimensions":2,"pooling":"mean","normalize":false}`,
		`{"model":"m","input":[[1,2,3]]}`,
		`{"model":"m","input":"x","candidate_labels":["a","b"],"hypothesis_template":"about {}","multi_label":true,"top_k":-1}`,
		`{"model":"m","input":"x","function_to_apply":"sigmoid","top_k":null}`,
		`{"model":"m","query":"q","documents":["d",{"text":"e"}],"top_n":1,"return_documents":false}`,
		`{"model":"m","input":"x","num_beams":4,"max_new_tokens":8,"min_new_tokens":1,"early_stopping":"never","length_penalty":1.5,"no_repeat_ngram_size":3}`,
		`{"model":"m","wait":false}`,
		`{"model":"m","max_tokens":1e999}`, `[]`, `null`, `"x"`, ``, `{`, `{"messages":{}}`, `{"keep_alive":[1]}`,
	}
	for i, s := range seeds {
		for r := range fuzzRoutes {
			if r == i%len(fuzzRoutes) || len(s) < 12 {
				f.Add(uint8(r), []byte(s))
			}
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		if err := r.decode(body); err != nil {
			checkRequestError(t, r.name, err)
		}
	})
}

// FuzzModelRoutes: any body of POST /v1/models/pull and any id of GET and
// DELETE /v1/models/{id} are answered with a 2xx or a proper 4xx error (an
// offline puller: nothing leaves the machine), never a panic or a 5xx.
func FuzzModelRoutes(f *testing.F) {
	store, err := models.Open(f.TempDir(), models.Options{})
	if err != nil {
		f.Fatal(err)
	}
	puller, err := hub.NewPuller(store, hub.PullConfig{Offline: true})
	if err != nil {
		f.Fatal(err)
	}
	s := New(Options{Constraints: testConstraints, Version: "test", Libs: backends.Libs{Root: f.TempDir()}})
	s.RegisterModels(core.ModelsOptions{Store: store, Puller: puller})
	for _, seed := range []struct {
		op   uint8
		body string
	}{
		{0, `{"model":"hf:owner/repo:Q4_K_M","name":"x/y","task":"chat"}`},
		{0, `{"model":"https://example.com/a.gguf","variant":"fp16","revision":"main"}`},
		{0, `{"model":"hf:../../etc"}`}, {0, `{"model":""}`}, {0, `{`}, {0, `{"task":"nope","model":"hf:a/b"}`},
		{1, "owner/model:latest"}, {1, "../x"}, {1, "%2e%2e/x"}, {1, ""},
		{2, "owner/model"}, {2, "a:b:c"}, {2, strings.Repeat("a", 300)},
	} {
		f.Add(seed.op, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, op uint8, data []byte) {
		var req *http.Request
		switch op % 3 {
		case 0:
			req = httptest.NewRequest("POST", "http://localhost/v1/models/pull", bytes.NewReader(data))
			req.Header.Set("Content-Type", "application/json")
		case 1, 2:
			method := "GET"
			if op%3 == 2 {
				method = "DELETE"
			}
			u := &url.URL{Scheme: "http", Host: "localhost", Path: "/v1/models/" + string(data)}
			req = httptest.NewRequestWithContext(context.Background(), method, "http://localhost/", nil)
			req.URL = u
			req.RequestURI = u.RequestURI()
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("op %d %q: status %d: %s", op%3, core.Clip(string(data)), w.Code, core.Clip(w.Body.String()))
		}
		if w.Code >= 400 {
			var e errorBody
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Message == "" {
				t.Fatalf("op %d: %d is not an OpenAI error: %s", op%3, w.Code, core.Clip(w.Body.String()))
			}
			if w.Body.Len() > 2*core.MaxErrorMessage+512 {
				t.Fatalf("op %d: error body of %d bytes", op%3, w.Body.Len())
			}
		}
	})
}

// parseSSE splits a server-sent event stream into the data of its events,
// failing on anything that is not "data: <payload>\n\n".
func parseSSE(t *testing.T, stream string) []string {
	t.Helper()
	if !strings.HasSuffix(stream, "\n\n") {
		t.Fatalf("stream does not end an event: %q", core.Clip(stream))
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(stream, "\n\n"), "\n\n") {
		if strings.ContainsAny(ev, "\r\n") || !strings.HasPrefix(ev, "data: ") {
			t.Fatalf("event %q is not one data line", core.Clip(ev))
		}
		out = append(out, strings.TrimPrefix(ev, "data: "))
	}
	return out
}

// FuzzSSEWriter: whatever text a model generates, each chunk the SSE writer
// sends is one "data:" line that parses back to the chunk, and the stream ends
// with [DONE]: content cannot break the event framing.
func FuzzSSEWriter(f *testing.F) {
	for _, s := range []string{"hello", "a\nb", "\n\ndata: [DONE]\n\n", "\r\n\r\n", "\u2028\u2029", "<|im_end|>", "\x00", "\xff\xfe", `"}`} {
		f.Add(s, "error: "+s)
	}
	f.Fuzz(func(t *testing.T, content, errMsg string) {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		sse := core.NewSSE(c)
		pieces := []string{content, "", content + content}
		for _, p := range pieces {
			sse.Send(openai.ChatCompletionChunk{Object: "chat.completion.chunk", Choices: []openai.ChunkChoice{{Delta: openai.ChunkDelta{Content: &p}}}})
		}
		sse.Send(gin.H{"error": core.ToAPIError(errors.New(errMsg))})
		sse.Done()
		events := parseSSE(t, w.Body.String())
		if len(events) != len(pieces)+2 || events[len(events)-1] != "[DONE]" {
			t.Fatalf("%d events, last %q", len(events), core.Clip(events[len(events)-1]))
		}
		for i, p := range pieces {
			var ch openai.ChatCompletionChunk
			if err := json.Unmarshal([]byte(events[i]), &ch); err != nil {
				t.Fatalf("event %d does not parse: %v", i, err)
			}
			want := viaJSON(p)
			if len(ch.Choices) != 1 || ch.Choices[0].Delta.Content == nil || *ch.Choices[0].Delta.Content != want {
				t.Fatalf("event %d: %q, want %q", i, events[i], want)
			}
		}
		var e errorBody
		if err := json.Unmarshal([]byte(events[len(pieces)]), &e); err != nil || !utf8.ValidString(e.Error.Message) {
			t.Fatalf("error event %q: %v", core.Clip(events[len(pieces)]), err)
		}
		if len(errMsg) <= core.MaxErrorMessage && e.Error.Message != viaJSON(errMsg) {
			t.Fatalf("error event message %q, want %q", e.Error.Message, errMsg)
		}
	})
}

// viaJSON is s as it reads back from JSON (invalid UTF-8 bytes become U+FFFD).
func viaJSON(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

// FuzzNDJSONWriter: whatever text a pull's progress carries (file names and
// statuses come from the hub), each event is exactly one line that decodes
// back to the event sent.
func FuzzNDJSONWriter(f *testing.F) {
	f.Add("pulling", "onnx/model.onnx", "sha256:00", int64(10), int64(3))
	f.Add("x\n{\"status\":\"success\"}", "a\r\nb", "\u2028\u2029", int64(0), int64(-1))
	f.Add("\x00\x1f\"\\", "</script>", "\xff\xfe", int64(1<<62), int64(0))
	f.Fuzz(func(t *testing.T, status, file, digest string, total, completed int64) {
		events := []models.Progress{
			{Status: status, File: file, Digest: digest, Total: total, Completed: completed},
			{Status: models.StatusSuccess},
		}
		rec := httptest.NewRecorder()
		nd := core.NewNDJSONWriter(rec)
		for _, ev := range events {
			if err := nd.Send(ev); err != nil {
				t.Fatal(err)
			}
		}
		lines := strings.Split(strings.TrimSuffix(rec.Body.String(), "\n"), "\n")
		if len(lines) != len(events) {
			t.Fatalf("%d events became %d lines: %q", len(events), len(lines), rec.Body.String())
		}
		for i, line := range lines {
			var got models.Progress
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("line %d %q: %v", i, line, err)
			}
			want := events[i]
			// JSON carries text as UTF-8: each invalid byte comes back as U+FFFD.
			want.Status, want.File, want.Digest = asJSONText(want.Status), asJSONText(want.File), asJSONText(want.Digest)
			if got != want {
				t.Fatalf("line %d decodes to %+v, want %+v", i, got, want)
			}
		}
	})
}

// asJSONText is s as encoding/json round-trips it: each byte of invalid
// UTF-8 becomes U+FFFD.
func asJSONText(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r) // ranging over a string yields U+FFFD per invalid byte
	}
	return b.String()
}
