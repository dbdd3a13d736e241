package api

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/models/hub"
)

// Wire-shape tests of the Ollama API, from the examples of Ollama's own API
// documentation (docs/api.md), on a fake backend behind the real cache and
// a real store.

// ollamaChat is a chat model that renders "<role>content" per message,
// tokenizes a byte per token, makes a fill-in-the-middle prompt when fim is
// set (fimPrompt), records what it is asked, and answers with reply.
type ollamaChat struct {
	fim   bool
	slots int // 0: 4
	reply func(req backends.Request) []backends.Event

	mu   sync.Mutex
	reqs []backends.Request
	vars []map[string]any
}

func (f *ollamaChat) Close() error { return nil }
func (f *ollamaChat) Size() int64  { return 1 }
func (f *ollamaChat) Slots() int {
	if f.slots > 0 {
		return f.slots
	}
	return 4
}
func (f *ollamaChat) Info() backends.Info {
	return backends.Info{Task: backends.TaskChat, ContextSize: 4096, ChatTemplate: true}
}
func (f *ollamaChat) TokenizeContext(_ context.Context, text string, _, _ bool) ([]int32, error) {
	out := make([]int32, len(text))
	for i := range text {
		out[i] = int32(text[i])
	}
	return out, nil
}
func (f *ollamaChat) DetokenizeContext(context.Context, []int32, bool) (string, error) {
	return "", nil
}
func (f *ollamaChat) ApplyChatTemplateContext(ctx context.Context, msgs []backends.Message, _ bool) (string, error) {
	f.mu.Lock()
	f.vars = append(f.vars, backends.TemplateVars(ctx))
	f.mu.Unlock()
	var sb strings.Builder
	for _, m := range msgs {
		sb.WriteString("<" + m.Role + ">" + m.Content)
	}
	return sb.String(), nil
}
func (f *ollamaChat) Generate(ctx context.Context, req backends.Request) (<-chan backends.Event, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	evs := []backends.Event{{Token: 1, Text: "The sky"}, {Token: 2, Text: " is blue."},
		{Token: -1, Done: true, Finish: backends.FinishStop, Usage: backends.Usage{PromptTokens: len(req.Prompt), CompletionTokens: 3}}}
	if f.reply != nil {
		evs = f.reply(req)
	}
	out := make(chan backends.Event, len(evs))
	for _, ev := range evs {
		out <- ev
	}
	close(out)
	return out, nil
}
func (f *ollamaChat) Backend() backends.Model { return f }

func (f *ollamaChat) last(t *testing.T) (backends.Request, map[string]any) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("the backend got no request")
	}
	var vars map[string]any
	if len(f.vars) > 0 {
		vars = f.vars[len(f.vars)-1]
	}
	return f.reqs[len(f.reqs)-1], vars
}

// InfillPromptContext is fimPrompt when the fake has FIM tokens.
func (f *ollamaChat) InfillPromptContext(_ context.Context, prefix, suffix string) ([]int32, error) {
	if !f.fim {
		return nil, backends.ErrNoInfill
	}
	return fimPrompt(prefix, suffix), nil
}

// fimPrompt is the fakes' infill prompt: 9001 prefix 9002 suffix 9003, a
// byte per token.
func fimPrompt(prefix, suffix string) []int32 {
	ids := []int32{9001}
	for i := range prefix {
		ids = append(ids, int32(prefix[i]))
	}
	ids = append(ids, 9002)
	for i := range suffix {
		ids = append(ids, int32(suffix[i]))
	}
	return append(ids, 9003)
}

type ollamaEnv struct {
	s     *Server
	cache *cache.Cache
	store *models.Store
	chat  *ollamaChat // org/chat: has fill-in-the-middle tokens
	plain *ollamaChat // org/plain: has none
	embed *fakeEmbed
}

// ollamaServer serves the Ollama API over a store holding org/chat and
// org/plain (GGUF) and org/embed (ONNX), each loaded as a fake; pull goes
// to the hub at hubURL ("" for none).
func ollamaServer(t *testing.T, hubURL string) *ollamaEnv {
	t.Helper()
	st := storeWithModels(t)
	src := filepath.Join(t.TempDir(), "plain.gguf")
	if err := os.WriteFile(src, tinyGGUF(t), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(context.Background(), src, models.ImportOptions{Name: "org/plain"}, nil); err != nil {
		t.Fatal(err)
	}
	env := &ollamaEnv{store: st, chat: &ollamaChat{fim: true}, plain: &ollamaChat{},
		embed: &fakeEmbed{fakeBase: fakeBase{backends.TaskEmbed}, dim: 4}}
	inst := map[string]cache.Instance{"org/chat": env.chat, "org/plain": env.plain, "org/embed": &fakeInstance{p: env.embed, device: "cpu"}}
	resolve := func(_ context.Context, id string) (cache.Spec, error) {
		if _, err := st.Get(id); err != nil {
			return cache.Spec{}, err
		}
		return cache.Spec{ID: id, Task: "chat"}, nil
	}
	load := func(_ context.Context, spec cache.Spec) (cache.Instance, error) { return inst[spec.ID], nil }
	cfg := cache.DefaultConfig()
	cfg.KeepAlive = -1
	c, err := cache.New(cfg, resolve, load)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	env.cache = c
	var pl *hub.Puller
	if hubURL != "" {
		if pl, err = hub.NewPuller(st, hub.PullConfig{Endpoint: hubURL, ProgressStep: 64 << 10}); err != nil {
			t.Fatal(err)
		}
	}
	env.s = New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: c})
	env.s.RegisterOllama(core.ModelsOptions{Store: st, Puller: pl, Unloader: c})
	return env
}

func (e *ollamaEnv) call(t *testing.T, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	e.s.Handler().ServeHTTP(w, req)
	return w
}

// ndjson splits an NDJSON body into objects.
func ndjson(t *testing.T, body string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// ollamaErr checks an Ollama error: status, {"error": "..."} holding want.
func ollamaErr(t *testing.T, w *httptest.ResponseRecorder, status int, want string) {
	t.Helper()
	var e map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != status || len(e) != 1 {
		t.Fatalf("status %d body %s; want %d and {\"error\": ...}", w.Code, w.Body, status)
	}
	if msg, _ := e["error"].(string); !strings.Contains(msg, want) {
		t.Fatalf("error %q does not say %q", msg, want)
	}
}

var finalKeys = []string{"total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"}

// checkFinal checks a final object: done, its reason, the exact counts,
// and every duration a non-negative integer of nanoseconds.
func checkFinal(t *testing.T, m map[string]any, reason string, prompt, eval int) {
	t.Helper()
	if m["done"] != true || m["done_reason"] != reason {
		t.Errorf("final object %v: want done, done_reason %q", m, reason)
	}
	for _, k := range finalKeys {
		v, ok := m[k].(float64)
		if !ok || v < 0 || v != float64(int64(v)) {
			t.Errorf("final object's %s = %v", k, m[k])
		}
	}
	if m["prompt_eval_count"] != float64(prompt) || m["eval_count"] != float64(eval) {
		t.Errorf("counts %v/%v, want %d/%d", m["prompt_eval_count"], m["eval_count"], prompt, eval)
	}
	if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m["created_at"])); err != nil {
		t.Errorf("created_at %v: %v", m["created_at"], err)
	}
}

// docs/api.md "Generate request (Streaming)" and "(No streaming)": stream
// defaults to true; the deltas carry response and done false; the last
// object the counts and durations. Ollama's name:tag resolves to the id.
func TestOllamaGenerateDocExamples(t *testing.T) {
	e := ollamaServer(t, "")
	w := e.call(t, "POST", "/api/generate", `{"model": "org/chat:latest", "prompt": "Why is the sky blue?"}`)
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/x-ndjson" || w.Header().Get(core.DeviceHeader) == "" {
		t.Fatalf("status %d, type %q, device %q: %s", w.Code, w.Header().Get("Content-Type"), w.Header().Get(core.DeviceHeader), w.Body)
	}
	lines := ndjson(t, w.Body.String())
	var text strings.Builder
	for _, l := range lines[:len(lines)-1] {
		if _, stats := l["eval_count"]; l["done"] != false || l["model"] != "org/chat:latest" || stats || l["done_reason"] != nil {
			t.Errorf("delta %v", l)
		}
		text.WriteString(l["response"].(string))
	}
	req, _ := e.chat.last(t)
	prompt := "<user>Why is the sky blue?"
	if text.String() != "The sky is blue." || len(req.Prompt) != len(prompt) {
		t.Errorf("streamed %q; backend prompt %d tokens, want %d", text.String(), len(req.Prompt), len(prompt))
	}
	checkFinal(t, lines[len(lines)-1], "stop", len(prompt), 3)

	w = e.call(t, "POST", "/api/generate", `{"model": "Org/Chat", "prompt": "Why is the sky blue?", "system": "Be brief.", "stream": false}`)
	var one map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &one); err != nil || w.Code != 200 || one["response"] != "The sky is blue." || one["model"] != "Org/Chat" {
		t.Fatalf("non-streamed (names match without regard to case): %d %s", w.Code, w.Body)
	}
	checkFinal(t, one, "stop", len("<system>Be brief.<user>Why is the sky blue?"), 3)
	if _, ok := one["context"]; ok {
		t.Errorf("a context was returned: %v", one)
	}
	// A field this dialect does not use is ignored; a body that is not a JSON object is a 400.
	if w := e.call(t, "POST", "/api/generate", `{"model":"org/chat","prompt":"x","stream":false,"width":512,"client_metadata":{"a":1}}`); w.Code != 200 {
		t.Errorf("unknown fields: %d %s", w.Code, w.Body)
	}
	for _, bad := range []string{``, `{`, `[1]`} {
		ollamaErr(t, e.call(t, "POST", "/api/generate", bad), 400, "")
		ollamaErr(t, e.call(t, "POST", "/api/chat", bad), 400, "")
	}
	ollamaErr(t, e.call(t, "POST", "/api/generate", `{"model":"org/chat","prompt":7}`), 400, "prompt")
	ollamaErr(t, e.call(t, "POST", "/api/chat", `{"model":"org/chat","messages":7}`), 400, "messages")
}

// docs/api.md "Generate request (With options)": every option of the
// example is accepted; those modeld honours reach the sampler, the others
// (mirostat, num_gpu, ...) are ignored.
func TestOllamaOptions(t *testing.T) {
	e := ollamaServer(t, "")
	body := `{"model": "org/chat", "prompt": "Why is the sky blue?", "stream": false, "options": {
    "num_keep": 5, "seed": 42, "num_predict": 100, "top_k": 20, "top_p": 0.9, "min_p": 0.0, "typical_p": 0.7,
    "repeat_last_n": 33, "temperature": 0.8, "repeat_penalty": 1.2, "presence_penalty": 1.5, "frequency_penalty": 1.0,
    "mirostat": 1, "mirostat_tau": 0.8, "mirostat_eta": 0.6, "penalize_newline": true, "stop": ["\n", "user:"],
    "numa": false, "num_ctx": 1024, "num_batch": 2, "num_gpu": 1, "main_gpu": 0, "low_vram": false,
    "vocab_only": false, "use_mmap": true, "use_mlock": false, "num_thread": 8}}`
	if w := e.call(t, "POST", "/api/generate", body); w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	req, _ := e.chat.last(t)
	s := req.Sampling
	if s.Seed == nil || *s.Seed != 42 || req.MaxTokens != 100 || s.TopK != 20 || s.TopP != float32(0.9) || s.Temperature != float32(0.8) ||
		s.RepeatPenalty != float32(1.2) || s.PresencePenalty != 1.5 || s.FrequencyPenalty != 1 || s.PenaltyLastN != 33 ||
		strings.Join(req.Stop, "|") != "\n|user:" {
		t.Errorf("the backend got %+v, stop %q, max %d", s, req.Stop, req.MaxTokens)
	}
	// repeat_last_n 0 turns the penalties off; num_predict -1 is no limit.
	if w := e.call(t, "POST", "/api/generate", `{"model":"org/chat","prompt":"x","stream":false,"options":{"repeat_last_n":0,"repeat_penalty":1.3,"num_predict":-1}}`); w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if req, _ := e.chat.last(t); req.Sampling.RepeatPenalty != 0 || req.MaxTokens != 0 {
		t.Errorf("repeat_last_n 0, num_predict -1: %+v max %d", req.Sampling, req.MaxTokens)
	}
	for body, want := range map[string]string{
		`{"model":"org/chat","prompt":"x","options":{"temperature":"hot"}}`:                                                    "options.temperature",
		`{"model":"org/chat","prompt":"x","options":{"temperature":5}}`:                                                        "temperature 5",
		`{"model":"org/chat","prompt":"x","options":{"stop":[""]}}`:                                                            "stop",
		`{"model":"org/chat","prompt":"x","options":{"repeat_last_n":-3}}`:                                                     "repeat_last_n",
		`{"model":"org/chat","prompt":"x","keep_alive":"soon"}`:                                                                "keep_alive",
		`{"model":"org/chat","prompt":"x","format":"yaml"}`:                                                                    "format",
		`{"model":"org/chat","prompt":"x","think":"maybe"}`:                                                                    "think",
		`{"model":"org/chat","prompt":"x","template":"{{ .Prompt }}"}`:                                                         "template",
		`{"model":"org/chat","prompt":"x","context":[1,2,3]}`:                                                                  "context",
		`{"model":"org/chat","prompt":"x","logprobs":true}`:                                                                    "logprobs",
		`{"model":"org/chat","prompt":"x","raw":true,"suffix":"y"}`:                                                            "suffix",
		`{"model":"org/chat","prompt":"x","images":["iVBORw0KGgo="]}`:                                                          "truncated or corrupt",
		`{"model":"org/plain","prompt":"def f():","suffix":"  return r"}`:                                                      "fill-in-the-middle",
		`{"model":"org/chat","prompt":"x","format":{"type":"object","properties":{"a":{"type":"string","pattern":"(?<=x)"}}}}`: "format",
	} {
		ollamaErr(t, e.call(t, "POST", "/api/generate", body), 400, want)
	}
}

// A missing model is Ollama's 404 with its wording, on every route that
// names one.
func TestOllamaModelNotFound(t *testing.T) {
	e := ollamaServer(t, "")
	for path, body := range map[string]string{
		"/api/generate": `{"model":"nope","prompt":"hi"}`,
		"/api/chat":     `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`,
		"/api/embed":    `{"model":"nope","input":"hi"}`,
		"/api/show":     `{"model":"nope"}`,
		"/api/copy":     `{"source":"nope","destination":"x"}`,
	} {
		ollamaErr(t, e.call(t, "POST", path, body), 404, "model 'nope' not found")
	}
	ollamaErr(t, e.call(t, "DELETE", "/api/delete", `{"model":"nope"}`), 404, "model 'nope' not found")
	ollamaErr(t, e.call(t, "POST", "/api/generate", `{"model":"Nope:Latest","prompt":"hi"}`), 404, "model 'Nope:Latest' not found")
	png := base64.StdEncoding.EncodeToString(testImage(t, "png", 2, 2))
	ollamaErr(t, e.call(t, "POST", "/api/generate", `{"model":"nope","prompt":"x","images":["`+png+`"]}`), 404, "model 'nope' not found")
}

// A busy model is a 503 with Retry-After in Ollama's error shape.
func TestOllamaBusy(t *testing.T) {
	resolve := func(context.Context, string) (cache.Spec, error) {
		return cache.Spec{}, &backends.BusyError{RetryAfter: 3 * time.Second}
	}
	c, err := cache.New(cache.DefaultConfig(), resolve, func(context.Context, cache.Spec) (cache.Instance, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	s := New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: c})
	s.RegisterOllama(core.ModelsOptions{})
	w := post(t, s, "/api/chat", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	ollamaErr(t, w, 503, "")
	if w.Header().Get("Retry-After") == "" {
		t.Errorf("no Retry-After: %v", w.Header())
	}
}

// docs/api.md "Request (with suffix)": a model whose vocabulary has the
// fill-in-the-middle tokens gets prefix, suffix and middle as its raw
// prompt; "Raw Mode" sends the prompt as it is.
func TestOllamaSuffixAndRaw(t *testing.T) {
	e := ollamaServer(t, "")
	w := e.call(t, "POST", "/api/generate", `{"model": "org/chat", "prompt": "def compute_gcd(a, b):", "suffix": "    return result", "options": {"temperature": 0}, "stream": false}`)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	req, _ := e.chat.last(t)
	if want := fimPrompt("def compute_gcd(a, b):", "    return result"); !slices.Equal(req.Prompt, want) || req.Sampling.Temperature != 0 {
		t.Errorf("infill prompt %v, want the model's %v", req.Prompt, want)
	}
	w = e.call(t, "POST", "/api/generate", `{"model": "org/chat", "prompt": "[INST] why is the sky blue? [/INST]", "raw": true, "stream": false}`)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if req, _ := e.chat.last(t); req.Text != "[INST] why is the sky blue? [/INST]" || len(req.Prompt) != len(req.Text) || len(req.Messages) != 0 {
		t.Errorf("raw: %+v", req)
	}
}

// docs/api.md "Request (Structured outputs)" and "(JSON mode)": format is
// compiled into the grammar response_format uses.
func TestOllamaFormat(t *testing.T) {
	e := ollamaServer(t, "")
	schema := `{"type": "object", "properties": {"age": {"type": "integer"}, "available": {"type": "boolean"}}, "required": ["age", "available"]}`
	for _, path := range []string{"/api/generate", "/api/chat"} {
		body := `{"model": "org/chat", "prompt": "Ollama is 22 years old and is busy saving the world. Respond using JSON", "stream": false, "format": ` + schema + `}`
		if path == "/api/chat" {
			body = `{"model": "org/chat", "messages": [{"role": "user", "content": "Ollama is 22"}], "stream": false, "format": ` + schema + `, "options": {"temperature": 0}}`
		}
		if w := e.call(t, "POST", path, body); w.Code != 200 {
			t.Fatalf("%s: %d %s", path, w.Code, w.Body)
		}
		req, _ := e.chat.last(t)
		if rf := req.ResponseFormat; rf.Type != backends.FormatJSONSchema || rf.Grammar == "" || !strings.Contains(string(rf.Schema), `"available"`) {
			t.Errorf("%s: response format %+v", path, rf)
		}
	}
	if w := e.call(t, "POST", "/api/generate", `{"model": "org/chat", "prompt": "What color is the sky? Respond using JSON", "format": "json", "stream": false}`); w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if req, _ := e.chat.last(t); req.ResponseFormat.Type != backends.FormatJSONObject || req.ResponseFormat.Grammar == "" {
		t.Errorf("json mode: %+v", req.ResponseFormat)
	}
}

// docs/api.md "Load a model" and "Unload a model", for generate and chat.
func TestOllamaLoadAndUnload(t *testing.T) {
	e := ollamaServer(t, "")
	for _, path := range []string{"/api/generate", "/api/chat"} {
		empty := `{"model": "org/chat"}`
		if path == "/api/chat" {
			empty = `{"model": "org/chat", "messages": []}`
		}
		w := e.call(t, "POST", path, empty)
		var m map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || w.Code != 200 || m["done"] != true || m["done_reason"] != "load" {
			t.Fatalf("%s load: %d %s", path, w.Code, w.Body)
		}
		if n := e.cache.Snapshot().Loaded; n != 1 {
			t.Fatalf("%s: %d loaded after a load", path, n)
		}
		w = e.call(t, "POST", path, strings.TrimSuffix(empty, "}")+`, "keep_alive": 0}`)
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || w.Code != 200 || m["done_reason"] != "unload" {
			t.Fatalf("%s unload: %d %s", path, w.Code, w.Body)
		}
		if n := e.cache.Snapshot().Loaded; n != 0 {
			t.Fatalf("%s: %d loaded after an unload", path, n)
		}
	}
	e.chat.mu.Lock()
	defer e.chat.mu.Unlock()
	if len(e.chat.reqs) != 0 {
		t.Errorf("loading generated %d times", len(e.chat.reqs))
	}
}
