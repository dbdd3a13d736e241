package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/openai"
	"github.com/modeld/modeld/api/tasks"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// fakeBase gives a fake pipeline the backends.Model methods; its Info names
// its task.
type fakeBase struct{ task string }

func (f fakeBase) Info() backends.Info {
	return backends.Info{Backend: "onnx", Task: f.task, Device: "cpu"}
}
func (fakeBase) Close() error { return nil }

// fakeInstance is a loaded pipeline as the daemon's cache holds it: it holds
// the model (backends.Holder) and knows its device.
type fakeInstance struct {
	p      backends.Model
	device string
}

func (f *fakeInstance) Close() error               { return nil }
func (f *fakeInstance) Size() int64                { return 1 }
func (f *fakeInstance) Slots() int                 { return 64 }
func (f *fakeInstance) Backend() backends.Model    { return f.p }
func (f *fakeInstance) Placement() cache.Placement { return cache.Placement{Device: f.device} }

var (
	_ cache.Instance  = (*fakeInstance)(nil)
	_ cache.Placed    = (*fakeInstance)(nil)
	_ backends.Holder = (*fakeInstance)(nil)
)

// pipelineServer serves the given pipelines by model id, each through a fakeInstance.
func pipelineServer(t *testing.T, ps map[string]backends.Model) (*Server, *cache.Cache) {
	t.Helper()
	resolve := func(_ context.Context, id string) (cache.Spec, error) {
		p, ok := ps[id]
		if !ok {
			return cache.Spec{}, fmt.Errorf("model %s: %w", id, errNotFound)
		}
		return cache.Spec{ID: id, Task: p.Info().Task, Backend: "onnx"}, nil
	}
	load := func(_ context.Context, spec cache.Spec) (cache.Instance, error) {
		return &fakeInstance{p: ps[spec.ID], device: "cpu"}, nil
	}
	log := slog.New(slog.DiscardHandler)
	c, err := cache.New(cache.DefaultConfig(), resolve, load, cache.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: c, Log: log}), c
}

// errNotFound is a store's "no such model" (a 404 through StatusError).
var errNotFound = notFoundError{}

type notFoundError struct{}

func (notFoundError) Error() string   { return "model not found" }
func (notFoundError) HTTPStatus() int { return 404 }

func pipePost(t *testing.T, s *Server, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("POST", "http://localhost"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	return w
}

func decodeBody(t *testing.T, w *httptest.ResponseRecorder, v any) {
	t.Helper()
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("response is not JSON: %v: %s", err, w.Body)
	}
}

// wantError checks an OpenAI error answer's status, param and message.
func wantError(t *testing.T, w *httptest.ResponseRecorder, status int, param string, msgParts ...string) errorBody {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d: %s", w.Code, status, w.Body)
	}
	e := decodeError(t, w)
	if param != "" && (e.Error.Param == nil || *e.Error.Param != param) {
		t.Errorf("param = %v, want %q (%s)", e.Error.Param, param, e.Error.Message)
	}
	for _, p := range msgParts {
		if !strings.Contains(e.Error.Message, p) {
			t.Errorf("message %q lacks %q", e.Error.Message, p)
		}
	}
	return e
}

func allFakes() map[string]backends.Model {
	return map[string]backends.Model{
		"embed":     &fakeEmbed{fakeBase: fakeBase{backends.TaskEmbed}, dim: 4},
		"classify":  &fakeClassify{fakeBase: fakeBase{backends.TaskClassify}},
		"zeroshot":  &fakeZeroShot{fakeBase: fakeBase{backends.TaskZeroShot}},
		"rerank":    &fakeRerank{fakeBase: fakeBase{backends.TaskRerank}},
		"summarize": &fakeSummarize{fakeBase: fakeBase{backends.TaskSummarize}},
	}
}

func TestPipelinesRefuseWrongModel(t *testing.T) {
	s, _ := pipelineServer(t, allFakes())
	cases := []struct {
		path, body, serves string
	}{
		{"/v1/embeddings", `{"model":"rerank","input":"x"}`, "reranking (POST /v1/rerank)"},
		{"/v1/classify", `{"model":"embed","input":"x"}`, "embeddings (POST /v1/embeddings)"},
		{"/v1/classify", `{"model":"rerank","input":"x","candidate_labels":["a"]}`, "reranking"},
		{"/v1/rerank", `{"model":"summarize","query":"q","documents":["d"]}`, "summarization (POST /v1/summarize)"},
		{"/v1/summarize", `{"model":"classify","input":"x"}`, "text classification (POST /v1/classify)"},
		{"/v1/embeddings", `{"model":"zeroshot","input":"x"}`, "zero-shot classification"},
	}
	for _, c := range cases {
		w := pipePost(t, s, c.path, c.body)
		e := wantError(t, w, 400, "model", "serves "+c.serves)
		if e.Error.Code != "wrong_model_type" {
			t.Errorf("%s: code = %v", c.path, e.Error.Code)
		}
	}
}

func TestPipelinesCommonErrors(t *testing.T) {
	s, _ := pipelineServer(t, allFakes())
	for _, path := range []string{"/v1/embeddings", "/v1/classify", "/v1/rerank", "/v1/summarize"} {
		wantError(t, pipePost(t, s, path, `{"input":"x","query":"q","documents":["d"]}`), 400, "model", "model is required")
		wantError(t, pipePost(t, s, path, ``), 400, "", "request body is empty")
		wantError(t, pipePost(t, s, path, `{"model":`), 400, "", "not valid JSON")
		w := pipePost(t, s, path, `{"model":"nope","input":"x","query":"q","documents":["d"]}`)
		if e := wantError(t, w, 404, ""); e.Error.Code != "model_not_found" {
			t.Errorf("%s unknown model: code %v", path, e.Error.Code)
		}
	}
	// No cache configured: a clear 503.
	bare := New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t)})
	wantError(t, pipePost(t, bare, "/v1/embeddings", `{"model":"m","input":"x"}`), 503, "", "no model runtime")
}

func TestPipelineErrorMapping(t *testing.T) {
	cases := []struct {
		err        error
		status     int
		retryAfter string
	}{
		{fmt.Errorf("pipelines: dimensions: %w", backends.ErrInvalidRequest), 400, ""},
		{fmt.Errorf("pipelines: pooling: %w", backends.ErrWrongModel), 400, ""},
		{fmt.Errorf("embed: %w", backends.ErrBusy), 503, "1"},
		{fmt.Errorf("embed: %w", backends.NewKind("batcher closed", 503, "model_busy")), 503, "1"},
		{errors.New("onnxruntime: run failed"), 500, ""},
	}
	for _, c := range cases {
		s, _ := pipelineServer(t, map[string]backends.Model{"m": &fakeEmbed{fakeBase: fakeBase{backends.TaskEmbed}, err: c.err}})
		w := pipePost(t, s, "/v1/embeddings", `{"model":"m","input":"x"}`)
		wantError(t, w, c.status, "", c.err.Error())
		if got := w.Header().Get("Retry-After"); got != c.retryAfter {
			t.Errorf("%v: Retry-After %q, want %q", c.err, got, c.retryAfter)
		}
	}
}

func TestPipelinesSetDeviceAndKeepAlive(t *testing.T) {
	ps := allFakes()
	resolve := func(_ context.Context, id string) (cache.Spec, error) {
		return cache.Spec{ID: id, Task: ps[id].Info().Task, Backend: "onnx"}, nil
	}
	load := func(_ context.Context, spec cache.Spec) (cache.Instance, error) {
		return &fakeInstance{p: ps[spec.ID], device: "cuda:0"}, nil
	}
	c, err := cache.New(cache.DefaultConfig(), resolve, load)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	s := New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: c})
	reqs := map[string]string{
		"/v1/embeddings": `{"model":"embed","input":"x","keep_alive":-1}`,
		"/v1/classify":   `{"model":"classify","input":"x","keep_alive":"-1"}`,
		"/v1/rerank":     `{"model":"rerank","query":"q","documents":["d"],"keep_alive":-1}`,
		"/v1/summarize":  `{"model":"summarize","input":"x","keep_alive":"-1s"}`,
	}
	for path, body := range reqs {
		w := pipePost(t, s, path, body)
		if w.Code != 200 || w.Header().Get(core.DeviceHeader) != "cuda:0" || w.Header().Get(core.TruncatedHeader) == "" {
			t.Errorf("%s: %d, device %q, truncated %q: %s", path, w.Code, w.Header().Get(core.DeviceHeader), w.Header().Get(core.TruncatedHeader), w.Body)
		}
	}
	snap := c.Snapshot()
	if len(snap.Models) != 4 {
		t.Fatalf("loaded %d models, want 4", len(snap.Models))
	}
	for _, m := range snap.Models {
		if m.KeepAlive >= 0 || m.Device != "cuda:0" {
			t.Errorf("%s: keep_alive %v, device %s; want kept loaded (keep_alive -1) on cuda:0", m.ID, m.KeepAlive, m.Device)
		}
	}
}

func TestParseTexts(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want []string
		msg  string
	}{
		{`"a"`, []string{"a"}, ""},
		{`["a","b"]`, []string{"a", "b"}, ""},
		{``, nil, "input is required"},
		{`null`, nil, "input is required"},
		{`""`, nil, "empty string"},
		{`[]`, nil, "empty array"},
		{`["a",""]`, nil, "input[1] is an empty string"},
		{`["a",3.5,""]`, nil, "input[1] is not a string; input[2] is an empty string"},
		{`[1,2,3]`, nil, "token ids"},
		{`[[1,2],[3]]`, nil, "token ids"},
		{`{"text":"a"}`, nil, "must be a string or an array of strings"},
	} {
		got, err := core.ParseTexts("input", json.RawMessage(c.raw), 8)
		if c.msg == "" {
			if err != nil || strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("%s: %q, %v", c.raw, got, err)
			}
			continue
		}
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, c.msg) || ae.Param == nil || *ae.Param != "input" {
			t.Errorf("%s: err %v, want a 400 on input saying %q", c.raw, err, c.msg)
		}
	}
}

// TestWrongKindRefusedBeforeLoad: a request of the wrong kind (embeddings to
// a chat model, chat to an embedding model) is refused from the model's
// stored tasks with wrong_model_type naming what the model serves, before
// the model is loaded or queued for; a request of the right kind loads it.
func TestWrongKindRefusedBeforeLoad(t *testing.T) {
	served := map[string][]string{
		"chat":     {backends.TaskChat},
		"embed":    {backends.TaskEmbed},
		"classify": {backends.TaskClassify, backends.TaskZeroShot},
	}
	var mu sync.Mutex
	var loads []string
	loaded := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(loads)
	}
	resolve := func(_ context.Context, id string) (cache.Spec, error) {
		ts, ok := served[id]
		if !ok {
			return cache.Spec{}, fmt.Errorf("model %s: %w", id, errNotFound)
		}
		return cache.Spec{ID: id, Task: ts[0], Backend: "onnx"}, nil
	}
	load := func(_ context.Context, spec cache.Spec) (cache.Instance, error) {
		mu.Lock()
		loads = append(loads, spec.ID)
		mu.Unlock()
		switch spec.ID {
		case "embed":
			return &fakeInstance{p: &fakeEmbed{fakeBase: fakeBase{backends.TaskEmbed}, dim: 4}, device: "cpu"}, nil
		case "classify":
			return &fakeInstance{p: &fakeClassify{fakeBase: fakeBase{backends.TaskClassify}}, device: "cpu"}, nil
		}
		return nil, fmt.Errorf("no fake for %s", spec.ID)
	}
	log := slog.New(slog.DiscardHandler)
	c, err := cache.New(cache.DefaultConfig(), resolve, load, cache.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	var asked []string
	s := New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: c, Log: log, Tasks: func(id string) ([]string, error) {
		asked = append(asked, id)
		if ts, ok := served[id]; ok {
			return ts, nil
		}
		return nil, errNotFound
	}})

	for _, tc := range []struct{ path, body, serves string }{
		{"/v1/embeddings", `{"model":"chat","input":"x"}`, "chat (POST /v1/chat/completions)"},
		{"/v1/rerank", `{"model":"chat:latest","query":"q","documents":["d"]}`, "chat (POST /v1/chat/completions)"},
		{"/v1/chat/completions", `{"model":"embed","messages":[{"role":"user","content":"x"}]}`, "embeddings (POST /v1/embeddings)"},
		{"/v1/completions", `{"model":"embed","prompt":"x"}`, "embeddings (POST /v1/embeddings)"},
		{"/v1/summarize", `{"model":"classify","input":"x"}`, "text classification (POST /v1/classify)"},
	} {
		e := wantError(t, pipePost(t, s, tc.path, tc.body), 400, "model", "serves "+tc.serves)
		if e.Error.Code != "wrong_model_type" {
			t.Errorf("%s: code %v, want wrong_model_type", tc.path, e.Error.Code)
		}
	}
	if l := loaded(); len(l) != 0 {
		t.Fatalf("refused requests loaded %v", l)
	}
	if len(asked) < 2 || asked[1] != "chat" {
		t.Errorf("Tasks was asked %v; want canonical ids (chat:latest is chat)", asked)
	}
	// The right kind loads and answers; so does zero-shot on a classifier.
	decodeBody(t, pipePost(t, s, "/v1/embeddings", `{"model":"embed","input":"x"}`), &openai.EmbeddingList{})
	decodeBody(t, pipePost(t, s, "/v1/classify", `{"model":"classify","input":"x"}`), &tasks.ClassificationList{})
	if l := loaded(); !slices.Equal(l, []string{"embed", "classify"}) {
		t.Errorf("loads = %v, want embed and classify", l)
	}
	// A model the store does not know is the cache's answer (its 404), not
	// a refusal from Tasks.
	if e := wantError(t, pipePost(t, s, "/v1/embeddings", `{"model":"other","input":"x"}`), 404, ""); e.Error.Code != "model_not_found" {
		t.Errorf("unknown model: code %v, want model_not_found", e.Error.Code)
	}
}
