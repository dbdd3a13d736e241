package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/cache"
)

// limitServer serves the given instances by model id and counts loads.
func limitServer(t *testing.T, insts map[string]cache.Instance, opt Options) (*Server, *atomic.Int32) {
	t.Helper()
	var loads atomic.Int32
	resolve := func(_ context.Context, id string) (cache.Spec, error) {
		if _, ok := insts[id]; !ok {
			return cache.Spec{}, fmt.Errorf("model %s: %w", id, errNotFound)
		}
		return cache.Spec{ID: id, Task: "test"}, nil
	}
	load := func(_ context.Context, spec cache.Spec) (cache.Instance, error) {
		loads.Add(1)
		return insts[spec.ID], nil
	}
	log := slog.New(slog.DiscardHandler)
	c, err := cache.New(cache.DefaultConfig(), resolve, load, cache.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	opt.Version, opt.Libs, opt.Cache, opt.Log, opt.Constraints = "test", backendsLibs(t), c, log, testConstraints
	return New(opt), &loads
}

// jsonOf marshals v (test values always marshal).
func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func repeatList(n int, item any) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = item
	}
	return out
}

func numberedTexts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("t%d", i)
	}
	return out
}

func logitBias(n int) map[string]int {
	m := make(map[string]int, n)
	for i := range n {
		m[fmt.Sprint(i)] = 1
	}
	return m
}

// TestRequestCaps: each cap takes a request at the cap (it reaches the model
// and succeeds) and refuses one just over it with a 400 naming the field,
// before any model is loaded.
func TestRequestCaps(t *testing.T) {
	const ctxCap = 4096
	chat := &fakeChat{template: true, finish: "stop", ctxSize: ctxCap}
	insts := map[string]cache.Instance{"chat": chat}
	for id, p := range allFakes() {
		insts[id] = &fakeInstance{p: p, device: "cpu"}
	}
	s, loads := limitServer(t, insts, Options{ContextCap: ctxCap})
	user := map[string]string{"role": "user", "content": "x"}
	chatBody := func(extra map[string]any) string {
		b := map[string]any{"model": "chat", "messages": []any{user}}
		for k, v := range extra {
			b[k] = v
		}
		return jsonOf(b)
	}
	longPrompt := func(n int) string { return strings.Repeat("a", n) }
	type side struct{ path, body string }
	cases := []struct {
		name      string
		param     string
		at, over  side
		wantInMsg string
	}{
		{"messages", "messages",
			side{"/v1/chat/completions", jsonOf(map[string]any{"model": "chat", "messages": repeatList(core.MaxChatMessages, user)})},
			side{"/v1/chat/completions", jsonOf(map[string]any{"model": "chat", "messages": repeatList(core.MaxChatMessages+1, user)})}, "4097 messages"},
		{"stop count", "stop",
			side{"/v1/chat/completions", chatBody(map[string]any{"stop": numberedTexts(core.MaxStopSequences)})},
			side{"/v1/chat/completions", chatBody(map[string]any{"stop": numberedTexts(core.MaxStopSequences + 1)})}, "17 sequences"},
		{"stop length", "stop",
			side{"/v1/chat/completions", chatBody(map[string]any{"stop": strings.Repeat("s", core.MaxStopBytes)})},
			side{"/v1/chat/completions", chatBody(map[string]any{"stop": strings.Repeat("s", core.MaxStopBytes+1)})}, "257 bytes"},
		{"logit_bias", "logit_bias",
			side{"/v1/chat/completions", chatBody(map[string]any{"logit_bias": logitBias(core.MaxLogitBias)})},
			side{"/v1/chat/completions", chatBody(map[string]any{"logit_bias": logitBias(core.MaxLogitBias + 1)})}, "1025 entries"},
		{"max_tokens", "max_tokens",
			side{"/v1/chat/completions", chatBody(map[string]any{"max_tokens": ctxCap - 1})},
			side{"/v1/chat/completions", chatBody(map[string]any{"max_tokens": ctxCap})}, "context of 4096 tokens"},
		{"max_completion_tokens", "max_completion_tokens",
			side{"/v1/chat/completions", chatBody(map[string]any{"max_completion_tokens": ctxCap - 1})},
			side{"/v1/chat/completions", chatBody(map[string]any{"max_completion_tokens": ctxCap})}, "context of 4096 tokens"},
		{"prompt bytes", "prompt",
			side{"/v1/completions", jsonOf(map[string]any{"model": "chat", "prompt": longPrompt((ctxCap - 1) * core.MaxBytesPerToken), "max_tokens": 1})},
			side{"/v1/completions", jsonOf(map[string]any{"model": "chat", "prompt": longPrompt((ctxCap-1)*core.MaxBytesPerToken + 1), "max_tokens": 1})}, "context of 4096 tokens"},
		{"message bytes", "messages",
			side{"/v1/chat/completions", jsonOf(map[string]any{"model": "chat", "max_tokens": 1,
				"messages": []any{map[string]string{"role": "user", "content": longPrompt((ctxCap-1)*core.MaxBytesPerToken - 6)}}})},
			side{"/v1/chat/completions", jsonOf(map[string]any{"model": "chat", "max_tokens": 1,
				"messages": []any{map[string]string{"role": "user", "content": longPrompt((ctxCap-1)*core.MaxBytesPerToken - 3)}}})}, "context of 4096 tokens"},
		{"embedding inputs", "input",
			side{"/v1/embeddings", jsonOf(map[string]any{"model": "embed", "input": numberedTexts(core.MaxEmbeddingInputs)})},
			side{"/v1/embeddings", jsonOf(map[string]any{"model": "embed", "input": numberedTexts(core.MaxEmbeddingInputs + 1)})}, "2049 texts"},
		{"classify inputs", "input",
			side{"/v1/classify", jsonOf(map[string]any{"model": "classify", "input": numberedTexts(core.MaxClassifyInputs)})},
			side{"/v1/classify", jsonOf(map[string]any{"model": "classify", "input": numberedTexts(core.MaxClassifyInputs + 1)})}, "2049 texts"},
		{"candidate labels", "candidate_labels",
			side{"/v1/classify", jsonOf(map[string]any{"model": "zeroshot", "input": "x", "candidate_labels": numberedTexts(core.MaxCandidateLabels)})},
			side{"/v1/classify", jsonOf(map[string]any{"model": "zeroshot", "input": "x", "candidate_labels": numberedTexts(core.MaxCandidateLabels + 1)})}, "1025 labels"},
		{"texts × labels", "candidate_labels",
			side{"/v1/classify", jsonOf(map[string]any{"model": "zeroshot", "input": numberedTexts(4), "candidate_labels": numberedTexts(core.MaxZeroShotPairs / 4)})},
			side{"/v1/classify", jsonOf(map[string]any{"model": "zeroshot", "input": numberedTexts(5), "candidate_labels": numberedTexts(core.MaxZeroShotPairs/5 + 1)})}, "pairs"},
		{"rerank documents", "documents",
			side{"/v1/rerank", jsonOf(map[string]any{"model": "rerank", "query": "q", "documents": numberedTexts(core.MaxRerankDocuments)})},
			side{"/v1/rerank", jsonOf(map[string]any{"model": "rerank", "query": "q", "documents": numberedTexts(core.MaxRerankDocuments + 1)})}, "1025 documents"},
		{"summarize inputs", "input",
			side{"/v1/summarize", jsonOf(map[string]any{"model": "summarize", "input": numberedTexts(core.MaxSummarizeInputs)})},
			side{"/v1/summarize", jsonOf(map[string]any{"model": "summarize", "input": numberedTexts(core.MaxSummarizeInputs + 1)})}, "65 texts"},
		{"num_beams", "num_beams",
			side{"/v1/summarize", jsonOf(map[string]any{"model": "summarize", "input": numberedTexts(core.MaxSummarizeInputs), "num_beams": core.MaxNumBeams})},
			side{"/v1/summarize", jsonOf(map[string]any{"model": "summarize", "input": "x", "num_beams": core.MaxNumBeams + 1})}, "num_beams 17"},
		{"max_new_tokens", "max_new_tokens",
			side{"/v1/summarize", jsonOf(map[string]any{"model": "summarize", "input": "x", "max_new_tokens": core.MaxNewTokens})},
			side{"/v1/summarize", jsonOf(map[string]any{"model": "summarize", "input": "x", "max_new_tokens": core.MaxNewTokens + 1})}, "16385"},
		{"min_new_tokens", "min_new_tokens",
			side{"/v1/summarize", jsonOf(map[string]any{"model": "summarize", "input": "x", "min_new_tokens": core.MaxNewTokens})},
			side{"/v1/summarize", jsonOf(map[string]any{"model": "summarize", "input": "x", "min_new_tokens": core.MaxNewTokens + 1})}, "16385"},
	}
	for _, tc := range cases {
		// Over the cap first: nothing is loaded for it.
		before := loads.Load()
		w := post(t, s, tc.over.path, tc.over.body)
		wantError(t, w, http.StatusBadRequest, tc.param, tc.wantInMsg)
		if loads.Load() != before {
			t.Errorf("%s: a model was loaded for a request over the cap", tc.name)
		}
		if len(w.Body.Bytes()) > 4096 {
			t.Errorf("%s: error body of %d bytes", tc.name, w.Body.Len())
		}
		if w := post(t, s, tc.at.path, tc.at.body); w.Code != http.StatusOK {
			t.Errorf("%s at the cap: %d %s", tc.name, w.Code, core.Clip(w.Body.String()))
		}
	}
}

// TestHugePromptRefusedBeforeLoad: a 50 MB chat message is refused from the
// body's length, before the body is read; a 3 MB one, under that bound, from
// the prompt's size once decoded. Both are context_length_exceeded, with the
// numbers, without loading the model, rendering the template or tokenizing.
func TestHugePromptRefusedBeforeLoad(t *testing.T) {
	chat := &fakeChat{template: true, finish: "stop", tokenizeStarted: make(chan struct{})}
	s, loads := limitServer(t, map[string]cache.Instance{"chat": chat}, Options{Limits: Limits{MaxBody: 64 << 20}})
	for _, tc := range []struct {
		size int
		want string
	}{
		{50 << 20, "more than any prompt that fits in the context of 8192 tokens"},
		{3 << 20, "bytes, so at least 1228"},
	} {
		text := strings.Repeat("a", tc.size)
		for _, r := range []struct{ path, body, param string }{
			{"/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"` + text + `"}]}`, "messages"},
			{"/v1/completions", `{"model":"chat","prompt":"` + text + `"}`, "prompt"},
		} {
			w := post(t, s, r.path, r.body)
			e := wantError(t, w, http.StatusBadRequest, r.param, tc.want, "8192 tokens")
			if e.Error.Code != "context_length_exceeded" {
				t.Errorf("%s, %d bytes: code %v", r.path, tc.size, e.Error.Code)
			}
		}
	}
	if n := loads.Load(); n != 0 {
		t.Errorf("%d loads for prompts that cannot fit", n)
	}
	select {
	case <-chat.tokenizeStarted:
		t.Error("the prompt was tokenized")
	default:
	}
}

// TestPromptBoundOfTheLoadedModel: a prompt that fits the daemon's largest
// context but not the loaded model's own is refused from its size, before
// tokenizing.
func TestPromptBoundOfTheLoadedModel(t *testing.T) {
	chat := &fakeChat{template: true, finish: "stop", ctxSize: 64, tokenizeStarted: make(chan struct{})}
	s, _ := limitServer(t, map[string]cache.Instance{"chat": chat}, Options{})
	prompt := strings.Repeat("a", 64*core.MaxBytesPerToken)
	w := post(t, s, "/v1/completions", `{"model":"chat","prompt":"`+prompt+`"}`)
	wantError(t, w, http.StatusBadRequest, "prompt", "context of 64 tokens")
	select {
	case <-chat.tokenizeStarted:
		t.Error("the prompt was tokenized")
	default:
	}
}

// TestClientGoneStopsTokenize: when the client goes away while the prompt is
// being tokenized, the tokenizer's context ends and the handler returns.
func TestClientGoneStopsTokenize(t *testing.T) {
	chat := &fakeChat{template: true, finish: "stop", tokenizeStarted: make(chan struct{})}
	s, _ := limitServer(t, map[string]cache.Instance{"chat": chat}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequest("POST", "http://localhost/v1/chat/completions", strings.NewReader(`{"model":"chat","messages":[{"role":"user","content":"hi"}]}`)).WithContext(ctx)
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.Handler().ServeHTTP(w, req)
	}()
	select {
	case <-chat.tokenizeStarted:
	case <-served:
		t.Fatalf("answered before tokenizing: %d %s", w.Code, w.Body)
	}
	cancel()
	<-served // the fake returns only once the request's context is done
	if w.Code == http.StatusOK {
		t.Errorf("status %d after the client left", w.Code)
	}
}

// TestErrorsStaySmall: user input of 1 MB quoted in an error is cut; the
// error body stays small whatever field carries it.
func TestErrorsStaySmall(t *testing.T) {
	chat := &fakeChat{template: true, finish: "stop"}
	insts := map[string]cache.Instance{"chat": chat}
	for id, p := range allFakes() {
		insts[id] = &fakeInstance{p: p, device: "cpu"}
	}
	s, _ := limitServer(t, insts, Options{})
	big := strings.Repeat("Z", 1<<20)
	digits := strings.Repeat("9", 1<<20)
	cases := []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"` + big + `","messages":[{"role":"user","content":"x"}]}`},
		{"/v1/chat/completions", `{"model":"chat","messages":[{"role":"` + big + `","content":"x"}]}`},
		{"/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"x"}],"logit_bias":{"` + big + `":1}}`},
		{"/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"x"}],"response_format":{"type":"` + big + `"}}`},
		{"/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"x"}],"max_tokens":` + digits + `}`},
		{"/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":[{"type":"` + big + `"}]}]}`},
		{"/v1/chat/completions", `"` + big + `"`},
		{"/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"x"}],"stop":["` + big + `"]}`},
		{"/v1/completions", `{"model":"` + big + `","prompt":"x"}`},
		{"/v1/embeddings", `{"model":"` + big + `","input":"x"}`},
		{"/v1/embeddings", `{"model":"embed","input":"x","encoding_format":"` + big + `"}`},
		{"/v1/embeddings", `{"model":"embed","input":"x","pooling":"` + big + `"}`},
		{"/v1/embeddings", `{"model":"chat","input":"x"` + strings.Repeat(" ", 1<<20) + `,"user":"` + big + `"}`},
		{"/v1/classify", `{"model":"classify","input":"x","function_to_apply":"` + big + `"}`},
		{"/v1/classify", `{"model":"classify","input":"x","top_k":"` + big + `"}`},
		{"/v1/classify", `{"model":"zeroshot","input":"x","candidate_labels":["a"],"hypothesis_template":"` + big + `"}`},
		{"/v1/rerank", `{"model":"` + big + `","query":"q","documents":["d"]}`},
		{"/v1/summarize", `{"model":"summarize","input":"x","early_stopping":"` + big + `"}`},
		{"/v1/unload", `{"model":"` + big + `"}`},
	}
	for _, tc := range cases {
		w := post(t, s, tc.path, tc.body)
		if w.Code < 400 || w.Code >= 500 {
			t.Errorf("%s %s…: status %d, want 4xx", tc.path, core.Clip(tc.body), w.Code)
		}
		decodeError(t, w)
		if n := w.Body.Len(); n > 4096 {
			t.Errorf("%s %s…: error body of %d bytes: %s", tc.path, core.Clip(tc.body), n, core.Clip(w.Body.String()))
		}
	}
}

// TestClipAndJoin: clip cuts on a character boundary, ClipMessage keeps both
// ends, and a request with many problems lists a few and counts the rest.
func TestClipAndJoin(t *testing.T) {
	s := strings.Repeat("é", 100) // 2 bytes each
	c := core.Clip(s)
	if !strings.HasSuffix(c, "…") || len(c) > core.MaxQuoted+len("…") || !strings.HasPrefix(s, strings.TrimSuffix(c, "…")) {
		t.Errorf("clip = %q", c)
	}
	if core.Clip("short") != "short" {
		t.Error("clip changed a short string")
	}
	m := core.ClipMessage("start " + strings.Repeat("x", 10000) + " end")
	if len(m) > core.MaxErrorMessage+8 || !strings.HasPrefix(m, "start ") || !strings.HasSuffix(m, " end") {
		t.Errorf("clipMessage kept %d bytes: %q…", len(m), core.Clip(m))
	}
	var errs []error
	for i := range 100 {
		errs = append(errs, core.BadRequest("x", "problem %d", i))
	}
	err := core.JoinBadRequests(errs)
	var ae *core.Error
	if !errors.As(err, &ae) || !strings.Contains(ae.Message, "and 92 more problems") || strings.Contains(ae.Message, "problem 8;") {
		t.Errorf("joined: %v", err)
	}
	// Every error the API writes goes through the bound.
	if e := core.ToAPIError(errors.New(strings.Repeat("y", 1<<20))); len(e.Message) > core.MaxErrorMessage+8 {
		t.Errorf("toAPIError kept %d bytes", len(e.Message))
	}
}
