package api

import (
	"context"
	"encoding/json"
	"errors"
	"go/build"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/modeld/modeld/api/openai"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// fakeModel is a backend's model that answers every generation with reply.
// It embeds backends.Model for what it does not override; it is not a
// backends.Tokenizer, so the handlers hand it the messages themselves.
type fakeModel struct {
	backends.Model
	reply func(req backends.Request) []backends.Event
	got   chan backends.Request
}

func (m *fakeModel) Info() backends.Info {
	return backends.Info{Backend: "fake-e2e", Task: "chat", ContextSize: 4096, Slots: 2, Device: "cpu"}
}
func (m *fakeModel) Close() error { return nil }
func (m *fakeModel) Generate(ctx context.Context, req backends.Request) (<-chan backends.Event, error) {
	m.got <- req
	evs := m.reply(req)
	out := make(chan backends.Event)
	go func() {
		defer close(out)
		for _, ev := range evs {
			select {
			case out <- ev:
			case <-ctx.Done():
				out <- backends.Event{Token: -1, Done: true, Finish: backends.FinishCancelled}
				return
			}
		}
	}()
	return out, nil
}

var _ backends.Generator = (*fakeModel)(nil)

// held is what a daemon's loader makes of any backend's model: a cache
// instance holding it.
type held struct{ m backends.Model }

func (h held) Backend() backends.Model { return h.m }
func (h held) Close() error            { return h.m.Close() }
func (h held) Size() int64             { return 1 }
func (h held) Slots() int              { return h.m.Info().Slots }

var registerFake = sync.OnceValue(func() chan backends.Request {
	got := make(chan backends.Request, 4)
	backends.Register("fake-e2e", func(_ context.Context, spec backends.LoadSpec) (backends.Model, error) {
		return &fakeModel{got: got, reply: func(req backends.Request) []backends.Event {
			last := req.Messages[len(req.Messages)-1].Content
			return []backends.Event{
				{Token: 1, Text: "echo: "},
				{Token: 2, Text: last},
				{Token: -1, Done: true, Finish: backends.FinishStop, Usage: backends.Usage{PromptTokens: 5, CompletionTokens: 2, CachedTokens: 1}},
			}
		}}, nil
	})
	return got
})

// backendServer is a Server whose every model is a chat model of the
// backend registered as name, loaded through the registry by the real cache
// as the daemon does; the cache is returned for inspection.
func backendServer(t testing.TB, name string) (*Server, *cache.Cache) {
	t.Helper()
	resolve := func(_ context.Context, id string) (cache.Spec, error) {
		return cache.Spec{ID: id, Task: "chat", Backend: name}, nil
	}
	load := func(ctx context.Context, spec cache.Spec) (cache.Instance, error) {
		m, err := backends.Load(ctx, spec.Backend, backends.LoadSpec{ID: spec.ID, Task: spec.Task})
		if err != nil {
			return nil, err
		}
		return held{m}, nil
	}
	c, err := cache.New(cache.DefaultConfig(), resolve, load)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return New(Options{Constraints: testConstraints, Version: "test", Libs: backends.Libs{Root: t.TempDir()}, Cache: c}), c
}

// TestFakeBackendEndToEnd: a backend is one registration. A fake backend
// registered by name serves /v1/chat/completions, streamed and not, through
// the real Server and cache; the loader picks the backend by the name in
// the model's spec, as the daemon's does.
func TestFakeBackendEndToEnd(t *testing.T) {
	got := registerFake()
	s, c := backendServer(t, "fake-e2e")

	body := `{"model":"fake:latest","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"}],` +
		`"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}],"tool_choice":"auto"}`
	w := post(t, s, "/v1/chat/completions", body)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var cc openai.ChatCompletion
	if err := json.Unmarshal(w.Body.Bytes(), &cc); err != nil {
		t.Fatal(err)
	}
	if len(cc.Choices) != 1 || cc.Choices[0].Message.Content == nil || *cc.Choices[0].Message.Content != "echo: hello" ||
		cc.Choices[0].FinishReason != "stop" || cc.Usage.PromptTokensDetails.CachedTokens != 1 || cc.Usage.TotalTokens != 7 {
		t.Fatalf("completion = %s", w.Body)
	}
	req := <-got
	if len(req.Messages) != 2 || req.Messages[0].Role != "system" || len(req.Tools) != 1 || req.Tools[0].Name != "lookup" ||
		req.ToolChoice.Mode != backends.ToolChoiceAuto || string(req.Tools[0].Parameters) != `{"type":"object"}` || len(req.Prompt) != 0 {
		t.Fatalf("the backend got %+v", req)
	}

	w = post(t, s, "/v1/chat/completions", `{"model":"fake","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"again"}]}`)
	<-got
	events := readSSE(t, w.Body.String())
	var text strings.Builder
	var finish string
	for _, ev := range events {
		if ev == "[DONE]" {
			continue
		}
		var ch openai.ChatCompletionChunk
		if err := json.Unmarshal([]byte(ev), &ch); err != nil {
			t.Fatalf("event %s: %v", ev, err)
		}
		for _, choice := range ch.Choices {
			if choice.Delta.Content != nil {
				text.WriteString(*choice.Delta.Content)
			}
			if choice.FinishReason != nil {
				finish = *choice.FinishReason
			}
		}
	}
	if text.String() != "echo: again" || finish != "stop" || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream gave %q, finish %q: %v", text.String(), finish, events)
	}
	if n := c.Snapshot().Loaded; n != 1 {
		t.Fatalf("m and m:latest should be one loaded model, cache has %d", n)
	}
}

// TestRegisterTwicePanics: a backend name is registered once.
func TestRegisterTwicePanics(t *testing.T) {
	registerFake()
	defer func() {
		if recover() == nil {
			t.Fatal("a second Register of fake-e2e did not panic")
		}
	}()
	backends.Register("fake-e2e", func(context.Context, backends.LoadSpec) (backends.Model, error) {
		return nil, errors.New("unused")
	})
}

// TestAPIImportsNoBackend: api speaks to models only through package
// backends' contract; no backend's package (nor the pipelines, which run on
// one) is among its imports or their dependencies.
func TestAPIImportsNoBackend(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "github.com/modeld/modeld/backends/"
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, prefix) {
			t.Errorf("api imports %s", imp)
		}
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	// Nor through another package: the task pipelines run on backends/onnx,
	// so api depends on neither.
	const pipelines = "github.com/modeld/modeld/pipelines"
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, prefix) || dep == pipelines || strings.HasPrefix(dep, pipelines+"/") {
			t.Errorf("api depends on %s", dep)
		}
	}
}
