package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/ollama"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
	"github.com/modeld/modeld/models"
)

// docs/api.md "List Local Models", "Show Model Information", "List Running
// Models", "Copy a Model", "Delete a Model".
func TestOllamaModelRoutes(t *testing.T) {
	e := ollamaServer(t, "")
	var tags struct {
		Models []ollama.OllamaModel `json:"models"`
	}
	tagsOf := func() map[string]ollama.OllamaModel {
		w := e.call(t, "GET", "/api/tags", "")
		if err := json.Unmarshal(w.Body.Bytes(), &tags); err != nil || w.Code != 200 {
			t.Fatalf("tags: %d %s", w.Code, w.Body)
		}
		out := map[string]ollama.OllamaModel{}
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
		Details      ollama.OllamaDetails `json:"details"`
		ModelInfo    map[string]any       `json:"model_info"`
		Capabilities []string             `json:"capabilities"`
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
		Models []ollama.OllamaModel `json:"models"`
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
	s.RegisterOllama(core.ModelsOptions{})
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
	checked.RegisterOllama(core.ModelsOptions{Store: st, Unloader: env.cache})
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
		Template     string               `json:"template"`
		Details      ollama.OllamaDetails `json:"details"`
		ModelInfo    map[string]any       `json:"model_info"`
		Capabilities []string             `json:"capabilities"`
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
