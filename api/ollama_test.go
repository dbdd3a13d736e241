package api

import (
	"bufio"
	"context"
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

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
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
	env.s.RegisterOllama(ModelsOptions{Store: st, Puller: pl, Unloader: c})
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
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/x-ndjson" || w.Header().Get(DeviceHeader) == "" {
		t.Fatalf("status %d, type %q, device %q: %s", w.Code, w.Header().Get("Content-Type"), w.Header().Get(DeviceHeader), w.Body)
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
		`{"model":"org/chat","prompt":"x","images":["iVBORw0KGgo="]}`:                                                          "text only",
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
	ollamaErr(t, e.call(t, "POST", "/api/generate", `{"model":"nope","prompt":"x","images":["aGk="]}`), 404, "model 'nope' not found")
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
	s.RegisterOllama(ModelsOptions{})
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

// docs/api.md "Chat Request (Streaming)", "(No streaming)" and "(With
// History)"; think and message.thinking.
func TestOllamaChat(t *testing.T) {
	e := ollamaServer(t, "")
	e.chat.reply = func(req backends.Request) []backends.Event {
		return []backends.Event{{Token: 1, Reasoning: "Rayleigh"}, {Token: 2, Text: "Scattering."},
			{Token: -1, Done: true, Finish: backends.FinishLength, Usage: backends.Usage{PromptTokens: len(req.Prompt), CompletionTokens: 2}}}
	}
	body := `{"model": "org/chat", "messages": [{"role": "user", "content": "why is the sky blue?"}, {"role": "assistant", "content": "due to rayleigh scattering."},
	  {"role": "user", "content": "how is that different than mie scattering?"}]}`
	w := e.call(t, "POST", "/api/chat", body)
	lines := ndjson(t, w.Body.String())
	if w.Code != 200 || len(lines) != 3 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	m0, m1 := lines[0]["message"].(map[string]any), lines[1]["message"].(map[string]any)
	if m0["role"] != "assistant" || m0["thinking"] != "Rayleigh" || m0["content"] != "" || m1["content"] != "Scattering." || lines[0]["done"] != false {
		t.Errorf("deltas %v %v", lines[0], lines[1])
	}
	prompt := "<user>why is the sky blue?<assistant>due to rayleigh scattering.<user>how is that different than mie scattering?"
	checkFinal(t, lines[2], "length", len(prompt), 2)
	if _, vars := e.chat.last(t); len(vars) != 2 || vars["enable_thinking"] != true || vars["thinking"] != true {
		t.Errorf("template vars %v without think, want thinking on (Ollama's default)", vars)
	}

	w = e.call(t, "POST", "/api/chat", `{"model": "org/chat", "messages": [{"role": "user", "content": "Hello!"}], "stream": false, "think": false, "options": {"seed": 101, "temperature": 0}}`)
	var one struct {
		Message OllamaMessage `json:"message"`
		Done    bool          `json:"done"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &one); err != nil || w.Code != 200 || !one.Done || one.Message.Content != "Scattering." || one.Message.Thinking != "Rayleigh" {
		t.Fatalf("non-streamed: %d %s", w.Code, w.Body)
	}
	req, vars := e.chat.last(t)
	if vars["enable_thinking"] != false || req.Sampling.Temperature != 0 || *req.Sampling.Seed != 101 {
		t.Errorf("think false: vars %v, sampling %+v", vars, req.Sampling)
	}
	for think, want := range map[string]map[string]any{
		`true`:   {"enable_thinking": true, "thinking": true},
		`"high"`: {"enable_thinking": true, "reasoning_effort": "high", "thinking": true},
		`"low"`:  {"enable_thinking": true, "reasoning_effort": "low", "thinking": true},
	} {
		e.call(t, "POST", "/api/chat", `{"model": "org/chat", "messages": [{"role": "user", "content": "Hello!"}], "stream": false, "think": `+think+`}`)
		if _, vars := e.chat.last(t); fmt.Sprint(vars) != fmt.Sprint(want) {
			t.Errorf("think %s: vars %v, want %v", think, vars, want)
		}
	}
	ollamaErr(t, e.call(t, "POST", "/api/chat", `{"model":"org/chat","messages":[{"role":"robot","content":"x"}]}`), 400, "messages[0].role")
	ollamaErr(t, e.call(t, "POST", "/api/chat", `{"model":"org/chat","messages":[{"role":"user","content":"x"}],"logprobs":true}`), 400, "logprobs")
	ollamaErr(t, e.call(t, "POST", "/api/chat", `{"model":"org/chat","messages":[{"role":"user","content":"x","images":["aGk="]}]}`), 400, "text only")
}

// docs/api.md "Chat request (with tools)": the tools reach the backend;
// the call comes back whole, arguments as an object, done_reason stop,
// streamed and not. A round trip (the call, then a tool message with
// tool_name) reaches the template linked by id.
func TestOllamaTools(t *testing.T) {
	e := ollamaServer(t, "")
	e.chat.reply = func(req backends.Request) []backends.Event {
		return []backends.Event{
			{Token: 1, ToolCalls: []backends.ToolCallDelta{{Index: 0, ID: "call_x", Name: "get_current_weather"}}},
			{Token: 2, ToolCalls: []backends.ToolCallDelta{{Index: 0, Arguments: `{"format": "celsius", `}}},
			{Token: 3, ToolCalls: []backends.ToolCallDelta{{Index: 0, Arguments: `"location": "Paris, FR"}`}}},
			{Token: -1, Done: true, Finish: backends.FinishToolCalls, Usage: backends.Usage{PromptTokens: 9, CompletionTokens: 3}},
		}
	}
	tools := `[{"type": "function", "function": {"name": "get_current_weather", "description": "Get the current weather for a location",
	  "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "The location"},
	  "format": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location", "format"]}}}]`
	body := `{"model": "org/chat", "messages": [{"role": "user", "content": "What is the weather today in Paris?"}], "stream": false, "tools": ` + tools + `}`
	w := e.call(t, "POST", "/api/chat", body)
	var one struct {
		Message    OllamaMessage `json:"message"`
		DoneReason string        `json:"done_reason"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &one); err != nil || w.Code != 200 || one.DoneReason != "stop" || len(one.Message.ToolCalls) != 1 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var args map[string]string
	if tc := one.Message.ToolCalls[0]; tc.Function.Name != "get_current_weather" || json.Unmarshal(tc.Function.Arguments, &args) != nil ||
		args["location"] != "Paris, FR" || args["format"] != "celsius" {
		t.Errorf("tool call %s", w.Body)
	}
	if req, _ := e.chat.last(t); len(req.Tools) != 1 || req.Tools[0].Name != "get_current_weather" || req.ToolChoice.Mode != "" {
		t.Errorf("the backend got tools %+v choice %+v", req.Tools, req.ToolChoice)
	}
	w = e.call(t, "POST", "/api/chat", strings.Replace(body, `"stream": false`, `"stream": true`, 1))
	lines := ndjson(t, w.Body.String())
	if len(lines) != 2 || lines[1]["done"] != true {
		t.Fatalf("streamed %s", w.Body)
	}
	calls, _ := lines[0]["message"].(map[string]any)["tool_calls"].([]any)
	if len(calls) != 1 || lines[0]["done"] != false {
		t.Errorf("streamed calls %v", lines[0])
	}

	e.chat.reply = nil
	round := `{"model": "org/chat", "stream": false, "tools": ` + tools + `, "messages": [
	  {"role": "user", "content": "What is the weather today in Paris?"},
	  {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_current_weather", "arguments": {"location": "Paris, FR", "format": "celsius"}}}]},
	  {"role": "tool", "content": "22 degrees", "tool_name": "get_current_weather"}]}`
	if w := e.call(t, "POST", "/api/chat", round); w.Code != 200 {
		t.Fatalf("round trip: %d %s", w.Code, w.Body)
	}
	req, _ := e.chat.last(t)
	if len(req.Messages) != 3 || len(req.Messages[1].ToolCalls) != 1 || req.Messages[2].Role != "tool" ||
		req.Messages[2].ToolCallID == "" || req.Messages[2].ToolCallID != req.Messages[1].ToolCalls[0].ID || req.Messages[2].Name != "get_current_weather" {
		t.Fatalf("messages %+v", req.Messages)
	}
	var sent map[string]string
	if err := json.Unmarshal([]byte(req.Messages[1].ToolCalls[0].Arguments), &sent); err != nil || sent["location"] != "Paris, FR" {
		t.Errorf("call arguments %q", req.Messages[1].ToolCalls[0].Arguments)
	}
	ollamaErr(t, e.call(t, "POST", "/api/chat", `{"model":"org/chat","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"bad name"}}]}`), 400, "tools[0]")
}

// docs/api.md "Generate Embeddings" (one and several inputs) and the older
// "Generate Embedding".
func TestOllamaEmbed(t *testing.T) {
	e := ollamaServer(t, "")
	w := e.call(t, "POST", "/api/embed", `{"model": "org/embed", "input": "Why is the sky blue?"}`)
	var res struct {
		Model           string      `json:"model"`
		Embeddings      [][]float32 `json:"embeddings"`
		PromptEvalCount int         `json:"prompt_eval_count"`
		TotalDuration   *int64      `json:"total_duration"`
		LoadDuration    *int64      `json:"load_duration"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil || w.Code != 200 || res.Model != "org/embed" || len(res.Embeddings) != 1 ||
		len(res.Embeddings[0]) != 4 || res.PromptEvalCount != 3 || res.TotalDuration == nil || res.LoadDuration == nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if n := e.embed.gotOpts.Normalize; n == nil || !*n {
		t.Errorf("/api/embed vectors not normalized: %+v", e.embed.gotOpts)
	}
	w = e.call(t, "POST", "/api/embed", `{"model": "org/embed", "input": ["Why is the sky blue?", "Why is the grass green?"]}`)
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil || w.Code != 200 || len(res.Embeddings) != 2 || len(e.embed.gotTexts) != 2 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	w = e.call(t, "POST", "/api/embeddings", `{"model": "org/embed", "prompt": "Here is an article about llamas..."}`)
	var old struct {
		Embedding []float32 `json:"embedding"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &old); err != nil || w.Code != 200 || len(old.Embedding) != 4 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if n := e.embed.gotOpts.Normalize; n == nil || *n {
		t.Errorf("/api/embeddings normalized: %+v", e.embed.gotOpts)
	}
	e.embed.truncated = 1
	ollamaErr(t, e.call(t, "POST", "/api/embed", `{"model": "org/embed", "input": "long", "truncate": false}`), 400, "truncate")
	ollamaErr(t, e.call(t, "POST", "/api/embed", `{"model": "org/embed", "input": []}`), 400, "input")
	ollamaErr(t, e.call(t, "POST", "/api/embed", `{"model": "org/chat", "input": "x"}`), 400, "serves")
}

// docs/api.md "List Local Models", "Show Model Information", "List Running
// Models", "Copy a Model", "Delete a Model".
func TestOllamaModelRoutes(t *testing.T) {
	e := ollamaServer(t, "")
	var tags struct {
		Models []OllamaModel `json:"models"`
	}
	tagsOf := func() map[string]OllamaModel {
		w := e.call(t, "GET", "/api/tags", "")
		if err := json.Unmarshal(w.Body.Bytes(), &tags); err != nil || w.Code != 200 {
			t.Fatalf("tags: %d %s", w.Code, w.Body)
		}
		out := map[string]OllamaModel{}
		for _, m := range tags.Models {
			out[m.Name] = m
		}
		return out
	}
	list := tagsOf()
	chat, ok := list["org/chat:latest"]
	if !ok || len(list) != 3 || chat.Model != chat.Name || chat.Size <= 0 || len(chat.Digest) != 64 || chat.Details.Format != "gguf" ||
		chat.Details.Family != "llama" || chat.ModifiedAt.IsZero() || chat.ExpiresAt != nil {
		t.Fatalf("tags %+v", tags.Models)
	}

	w := e.call(t, "POST", "/api/show", `{"model": "org/chat"}`)
	var show struct {
		Details      OllamaDetails  `json:"details"`
		ModelInfo    map[string]any `json:"model_info"`
		Capabilities []string       `json:"capabilities"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &show); err != nil || w.Code != 200 || show.Details.Format != "gguf" ||
		show.ModelInfo["general.architecture"] != "llama" || len(show.Capabilities) == 0 || show.Capabilities[0] != "completion" {
		t.Fatalf("show: %d %s", w.Code, w.Body)
	}
	if w := e.call(t, "POST", "/api/show", `{"name": "org/embed"}`); w.Code != 200 || !strings.Contains(w.Body.String(), `"embedding"`) {
		t.Errorf("show embed: %d %s", w.Code, w.Body)
	}

	if w := e.call(t, "POST", "/api/chat", `{"model":"org/chat","messages":[{"role":"user","content":"hi"}],"stream":false}`); w.Code != 200 {
		t.Fatal(w.Body)
	}
	w = e.call(t, "GET", "/api/ps", "")
	var ps struct {
		Models []OllamaModel `json:"models"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &ps); err != nil || w.Code != 200 || len(ps.Models) != 1 || ps.Models[0].Name != "org/chat:latest" ||
		ps.Models[0].ExpiresAt == nil || ps.Models[0].SizeVRAM == nil || ps.Models[0].Digest != chat.Digest || ps.Models[0].Details.Family != "llama" {
		t.Fatalf("ps: %d %s", w.Code, w.Body)
	}

	if w := e.call(t, "POST", "/api/copy", `{"source": "org/chat", "destination": "org/chat-backup"}`); w.Code != 200 {
		t.Fatalf("copy: %d %s", w.Code, w.Body)
	}
	list = tagsOf()
	if cp, ok := list["org/chat-backup:latest"]; !ok || cp.Size != chat.Size || cp.Digest == chat.Digest {
		t.Fatalf("after copy: %+v", list)
	}
	ollamaErr(t, e.call(t, "POST", "/api/copy", `{"source": "org/chat", "destination": "../x"}`), 400, "destination")

	// Delete unloads the model first, then removes it; the copy keeps the blobs.
	if w := e.call(t, "DELETE", "/api/delete", `{"model": "org/chat:latest"}`); w.Code != 200 || w.Body.Len() != 0 {
		t.Fatalf("delete: %d %s", w.Code, w.Body)
	}
	if n := e.cache.Snapshot().Loaded; n != 0 {
		t.Errorf("%d loaded after delete", n)
	}
	ollamaErr(t, e.call(t, "POST", "/api/show", `{"model": "org/chat"}`), 404, "model 'org/chat' not found")
	if w := e.call(t, "POST", "/api/show", `{"model": "org/chat-backup"}`); w.Code != 200 {
		t.Errorf("the copy went with the original: %d %s", w.Code, w.Body)
	}

	w = e.call(t, "GET", "/api/version", "")
	if w.Code != 200 || w.Body.String() != `{"version":"test"}` {
		t.Errorf("version: %d %s", w.Code, w.Body)
	}
}

// docs/api.md "Pull a Model": NDJSON progress in Ollama's shape (status,
// digest, total, completed) from the store's puller, ending in success;
// stream false gives one object.
func TestOllamaPull(t *testing.T) {
	body := tinyGGUF(t)
	e := ollamaServer(t, miniHub(t, "tiny-Q4_0.gguf", body).URL)
	w := e.call(t, "POST", "/api/pull", `{"model": "org/tiny:Q4_0"}`)
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	lines := ndjson(t, w.Body.String())
	if lines[0]["status"] != "pulling manifest" || lines[len(lines)-1]["status"] != "success" {
		t.Errorf("lines %v", lines)
	}
	var full bool
	for _, l := range lines {
		for k := range l {
			if k != "status" && k != "digest" && k != "total" && k != "completed" {
				t.Errorf("line %v has %q", l, k)
			}
		}
		d, _ := l["digest"].(string)
		if l["total"] == float64(len(body)) && l["completed"] == float64(len(body)) && strings.HasPrefix(d, "sha256:") && l["status"] == "pulling "+d[7:19] {
			full = true
		}
	}
	if !full {
		t.Errorf("no progress line reached the total: %v", lines)
	}
	if _, err := e.store.Get("org/tiny:q4_0"); err != nil {
		t.Errorf("pulled model not in the store: %v", err)
	}
	w = e.call(t, "POST", "/api/pull", `{"name": "hf:org/tiny:Q4_0", "stream": false}`)
	if w.Code != 200 || w.Body.String() != `{"status":"success"}` {
		t.Errorf("stream false: %d %s", w.Code, w.Body)
	}
	w = e.call(t, "POST", "/api/pull", `{"model": "org/missing:Q4_0"}`)
	if lines := ndjson(t, w.Body.String()); w.Code != 200 || lines[len(lines)-1]["error"] == nil {
		t.Errorf("failed pull: %d %s", w.Code, w.Body)
	}
	ollamaErr(t, e.call(t, "POST", "/api/pull", `{}`), 400, "model is required")
}

// blockingChat sends one piece, then waits for the request's end: a client
// that goes away cancels the generation.
type blockingChat struct {
	*ollamaChat
	cancelled chan struct{}
}

func (b *blockingChat) Backend() backends.Model { return b }
func (b *blockingChat) Generate(ctx context.Context, req backends.Request) (<-chan backends.Event, error) {
	out := make(chan backends.Event)
	go func() {
		defer close(out)
		out <- backends.Event{Token: 1, Text: "The"}
		<-ctx.Done()
		close(b.cancelled)
		out <- backends.Event{Token: -1, Done: true, Finish: backends.FinishCancelled}
	}()
	return out, nil
}

// A streamed chat whose client disconnects stops generating; a request
// with keep_alive 0 leaves its model unloaded when it ends.
func TestOllamaCancelAndKeepAliveZero(t *testing.T) {
	e := ollamaServer(t, "")
	w := e.call(t, "POST", "/api/chat", `{"model":"org/chat","messages":[{"role":"user","content":"hi"}],"stream":false,"keep_alive":0}`)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	for _, m := range e.cache.Snapshot().Models {
		if m.State != "unloading" {
			t.Errorf("after keep_alive 0: %+v", m)
		}
	}

	b := &blockingChat{ollamaChat: &ollamaChat{}, cancelled: make(chan struct{})}
	resolve := func(_ context.Context, id string) (cache.Spec, error) { return cache.Spec{ID: id, Task: "chat"}, nil }
	c, err := cache.New(cache.DefaultConfig(), resolve, func(context.Context, cache.Spec) (cache.Instance, error) { return b, nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	s := New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: c})
	s.RegisterOllama(ModelsOptions{})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL+"/api/chat", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.Contains(line, `"content":"The"`) {
		t.Fatalf("first line %q: %v", line, err)
	}
	resp.Body.Close() // the client goes away
	<-b.cancelled
}

// A request of the wrong kind (chat or generate with an embedding model,
// embed with a chat model) is refused as Ollama refuses it, naming the
// /api/ route that serves the model, with the status and code of the one
// task check and before any load; the same refusal comes from the loaded
// model's capabilities when the store's tasks are not known.
func TestOllamaWrongTask(t *testing.T) {
	env := ollamaServer(t, "")
	st := env.store
	tasks := func(id string) ([]string, error) {
		m, err := st.Get(id)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, t := range m.Tasks {
			out = append(out, string(t))
		}
		return out, nil
	}
	checked := New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: env.cache, Tasks: tasks})
	checked.RegisterOllama(ModelsOptions{Store: st, Unloader: env.cache})
	cases := []struct{ path, body, want string }{
		{"/api/chat", `{"model":"org/embed","messages":[{"role":"user","content":"hi"}],"stream":false}`,
			`"org/embed" does not support chat; it serves embeddings: use POST /api/embed`},
		{"/api/chat", `{"model":"org/embed:latest","messages":[]}`, `"org/embed:latest" does not support chat; it serves embeddings`},
		{"/api/generate", `{"model":"org/embed","prompt":"hi","stream":false}`,
			`"org/embed" does not support generate; it serves embeddings: use POST /api/embed`},
		{"/api/generate", `{"model":"org/embed","prompt":"hi","raw":true,"stream":false}`, `"org/embed" does not support generate`},
		{"/api/embed", `{"model":"org/chat","input":"hi"}`,
			`"org/chat" does not support embeddings; it serves chat: use POST /api/chat or /api/generate`},
		{"/api/embeddings", `{"model":"org/chat","prompt":"hi"}`, `"org/chat" does not support embeddings; it serves chat`},
	}
	for _, tc := range cases {
		req := httptest.NewRequest("POST", "http://localhost"+tc.path, strings.NewReader(tc.body))
		w := httptest.NewRecorder()
		checked.Handler().ServeHTTP(w, req)
		ollamaErr(t, w, 400, tc.want)
		if strings.Contains(w.Body.String(), "/v1/") {
			t.Errorf("%s: the refusal names an OpenAI route: %s", tc.path, w.Body)
		}
	}
	if l := env.cache.Snapshot().Models; len(l) != 0 {
		t.Fatalf("refused requests loaded %+v", l)
	}
	// Without the store's tasks the loaded model's capabilities refuse it,
	// in the same words.
	for _, tc := range cases[4:] {
		ollamaErr(t, env.call(t, "POST", tc.path, tc.body), 400, tc.want)
	}
	ollamaErr(t, env.call(t, "POST", "/api/chat", cases[0].body), 400, cases[0].want)
}

// docs/api.md "Show Model Information": the template is the GGUF's chat
// template, model_info holds the header's scalar keys (arrays empty, as
// Ollama writes them without verbose) with the context modeld serves, and
// the capabilities follow the template and the vocabulary, all read from
// the store without loading the model.
func TestOllamaShow(t *testing.T) {
	e := ollamaServer(t, "")
	imp := func(path, name string) {
		if _, err := e.store.Import(context.Background(), path, models.ImportOptions{Name: name}, nil); err != nil {
			t.Fatal(err)
		}
	}
	imp(testenv.LlamaChatModel(t, "starcoder", "Qwen-Qwen2.5-7B-Instruct"), "t/coder")
	imp(testenv.LlamaChatModel(t, "qwen2", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"), "t/r1")
	qwenTmpl, err := os.ReadFile(testenv.LlamaTemplate(t, "Qwen-Qwen2.5-7B-Instruct"))
	if err != nil {
		t.Fatal(err)
	}
	type shown struct {
		Template     string         `json:"template"`
		Details      OllamaDetails  `json:"details"`
		ModelInfo    map[string]any `json:"model_info"`
		Capabilities []string       `json:"capabilities"`
	}
	show := func(name string) shown {
		t.Helper()
		w := e.call(t, "POST", "/api/show", `{"model":"`+name+`"}`)
		var s shown
		if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil || w.Code != 200 {
			t.Fatalf("show %s: %d %s", name, w.Code, w.Body)
		}
		return s
	}
	for _, tc := range []struct {
		name, template string
		caps           []string
	}{
		{"org/chat", ggufgen.ChatMLTemplate, []string{"completion"}},
		{"t/coder:latest", string(qwenTmpl), []string{"completion", "tools", "insert"}},
		{"t/r1", "", []string{"completion", "thinking"}},
		{"org/embed", "", []string{"embedding"}},
	} {
		s := show(tc.name)
		if tc.template != "" && s.Template != tc.template {
			t.Errorf("%s: template %.80q…, want the GGUF's", tc.name, s.Template)
		}
		if !slices.Equal(s.Capabilities, tc.caps) {
			t.Errorf("%s: capabilities %v, want %v", tc.name, s.Capabilities, tc.caps)
		}
	}
	if s := show("t/r1"); !strings.Contains(s.Template, "<think>") {
		t.Errorf("t/r1: template %.80q… is not DeepSeek R1's", s.Template)
	}

	s := show("org/chat")
	mi := s.ModelInfo
	for k, want := range map[string]any{
		"general.architecture": "llama", "general.name": "modeld-test-spm", "llama.context_length": 2048.0,
		"llama.embedding_length": 64.0, "llama.block_count": 2.0, "llama.attention.head_count": 4.0,
		"llama.attention.layer_norm_rms_epsilon": 1e-05, "tokenizer.ggml.model": "llama", "tokenizer.ggml.add_bos_token": true,
	} {
		if mi[k] != want {
			t.Errorf("model_info[%s] = %#v, want %#v", k, mi[k], want)
		}
	}
	if p, _ := mi["general.parameter_count"].(float64); p <= 0 {
		t.Errorf("general.parameter_count = %v", mi["general.parameter_count"])
	}
	for _, k := range []string{"tokenizer.ggml.tokens", "tokenizer.ggml.token_type"} {
		if a, ok := mi[k].([]any); !ok || len(a) != 0 {
			t.Errorf("model_info[%s] = %v, want []", k, mi[k])
		}
	}
	if _, ok := mi["tokenizer.chat_template"]; ok {
		t.Error("model_info repeats the chat template")
	}
	if d := s.Details; d.Format != "gguf" || d.Family != "llama" || d.ParameterSize == "" || d.QuantizationLevel != "F32" {
		t.Errorf("details %+v", d)
	}
	if l := e.cache.Snapshot().Models; len(l) != 0 {
		t.Errorf("show loaded %+v", l)
	}
}

// A GGUF that no longer reads (truncated on disk after the import) still
// shows what the store recorded, without a template or the header's keys.
func TestOllamaShowUnreadableHeader(t *testing.T) {
	e := ollamaServer(t, "")
	m, err := e.store.Get("org/chat")
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.store.FilePath(m, m.GGUF.File)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 100); err != nil {
		t.Fatal(err)
	}
	w := e.call(t, "POST", "/api/show", `{"model":"org/chat"}`)
	var s struct {
		Template     string         `json:"template"`
		ModelInfo    map[string]any `json:"model_info"`
		Capabilities []string       `json:"capabilities"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil || w.Code != 200 || s.Template != "" ||
		s.ModelInfo["general.architecture"] != "llama" || s.ModelInfo["llama.attention.head_count"] != nil || !slices.Equal(s.Capabilities, []string{"completion"}) {
		t.Fatalf("show of a truncated GGUF: %d %s", w.Code, w.Body)
	}
}
