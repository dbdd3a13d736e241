package api

import (
	"context"
	"log/slog"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// "m:latest" and "m" are one model for requests, ps (the loaded section),
// POST /v1/unload and DELETE /v1/models/{id}.
func TestLatestTagNamesTheLoadedModel(t *testing.T) {
	s, c := pipelineServer(t, allFakes())
	for _, id := range []string{"embed", "embed:latest"} {
		if w := pipePost(t, s, "/v1/embeddings", `{"model":"`+id+`","input":"hi"}`); w.Code != 200 {
			t.Fatalf("embeddings with model %s = %d %s", id, w.Code, w.Body)
		}
	}
	if ms := c.Snapshot().Models; len(ms) != 1 || ms[0].ID != "embed" {
		t.Fatalf("loaded = %+v, want one entry embed", ms)
	}
	if w := pipePost(t, s, "/v1/unload", `{"model":"embed:latest","wait":false}`); w.Code != 200 {
		t.Fatalf("unload of embed:latest while embed is loaded = %d %s", w.Code, w.Body)
	}
	if ms := c.Snapshot().Models; len(ms) != 0 {
		t.Fatalf("loaded after unload = %+v", ms)
	}
	w := pipePost(t, s, "/v1/unload", `{"model":"embed"}`)
	if e := decodeError(t, w); w.Code != 404 || e.Error.Code != "model_not_loaded" {
		t.Fatalf("second unload = %d %s, want 404 model_not_loaded", w.Code, w.Body)
	}
	w = pipePost(t, s, "/v1/unload", `{"model":"../x"}`)
	if decodeError(t, w); w.Code != 400 {
		t.Fatalf("unload of a malformed id = %d %s, want 400", w.Code, w.Body)
	}
}

func TestDeleteLatestUnloadsTheModel(t *testing.T) {
	st := storeWithModels(t)
	closed := make(chan string, 1)
	resolve := func(_ context.Context, id string) (cache.Spec, error) {
		return cache.Spec{ID: id, Task: "embed", Backend: "onnx"}, nil
	}
	load := func(_ context.Context, spec cache.Spec) (cache.Instance, error) {
		return &closeSpy{fakeInstance: fakeInstance{p: &fakeEmbed{fakeBase: fakeBase{backends.TaskEmbed}, dim: 4}}, id: spec.ID, closed: closed}, nil
	}
	c, err := cache.New(cache.DefaultConfig(), resolve, load, cache.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	s := New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: c, Log: slog.New(slog.DiscardHandler)})
	s.RegisterModels(core.ModelsOptions{Store: st, Unloader: c})

	h, err := c.Acquire(context.Background(), "org/embed", cache.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	if w := do(t, s, "GET", "/v1/models/org/embed:latest", nil); w.Code != 200 {
		t.Fatalf("GET /v1/models/org/embed:latest = %d %s", w.Code, w.Body)
	}
	if w := do(t, s, "DELETE", "/v1/models/org/embed:latest", nil); w.Code != 200 {
		t.Fatalf("DELETE /v1/models/org/embed:latest while org/embed is loaded = %d %s", w.Code, w.Body)
	}
	select {
	case id := <-closed:
		if id != "org/embed" {
			t.Fatalf("closed %q, want org/embed", id)
		}
	default:
		t.Fatal("the delete returned with the model still loaded")
	}
	if ms := c.Snapshot().Models; len(ms) != 0 {
		t.Fatalf("loaded after delete = %+v", ms)
	}
	if _, err := st.Get("org/embed"); err == nil {
		t.Fatal("org/embed is still in the store")
	}
}

// closeSpy is a fakeInstance that reports its Close.
type closeSpy struct {
	fakeInstance
	id     string
	closed chan string
}

func (c *closeSpy) Close() error { c.closed <- c.id; return nil }
