package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/openai"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// fakeChat is a chat model that answers with a scripted list of text pieces.
type fakeChat struct {
	pieces   []string
	finish   backends.FinishReason
	err      error // returned by Generate
	failWith error // sent as the last event
	template bool
	gotReq   chan backends.Request
	// tokenizeStarted, when set, is closed when tokenizing starts, which
	// then lasts until the request's context ends.
	tokenizeStarted chan struct{}
	ctxSize         int // the context Info gives; 0: 64
	// vision: the model reads images (a projector); without it a request
	// with images is refused as a text-only backend refuses them.
	vision bool
}

// refuseImages is a text-only backend's answer to messages with images.
func (f *fakeChat) refuseImages(msgs []backends.Message) error {
	if n := backends.CountImages(msgs); n > 0 && !f.vision {
		return &backends.ImageInputError{Images: n}
	}
	return nil
}

func (f *fakeChat) Close() error { return nil }
func (f *fakeChat) Size() int64  { return 1 }
func (f *fakeChat) Slots() int   { return 4 }
func (f *fakeChat) Info() backends.Info {
	if f.ctxSize > 0 {
		return backends.Info{ContextSize: f.ctxSize}
	}
	return backends.Info{ContextSize: 64}
}
func (f *fakeChat) TokenizeContext(ctx context.Context, text string, _, _ bool) ([]int32, error) {
	if f.tokenizeStarted != nil {
		close(f.tokenizeStarted)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	out := make([]int32, len(text))
	for i := range text {
		out[i] = int32(text[i])
	}
	return out, nil
}
func (f *fakeChat) ApplyChatTemplateContext(_ context.Context, msgs []backends.Message, _ bool) (string, error) {
	if !f.template {
		return "", backends.ErrNoChatTemplate
	}
	if err := f.refuseImages(msgs); err != nil {
		return "", err
	}
	var sb strings.Builder
	for _, m := range msgs {
		sb.WriteString("<" + m.Role + ">" + m.Content)
	}
	return sb.String(), nil
}
func (f *fakeChat) DetokenizeContext(_ context.Context, ids []int32, _ bool) (string, error) {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b), nil
}
func (f *fakeChat) Generate(ctx context.Context, req backends.Request) (<-chan backends.Event, error) {
	if f.gotReq != nil {
		f.gotReq <- req
	}
	if err := f.refuseImages(req.Messages); err != nil {
		return nil, err
	}
	if err := req.Unsupported("this model"); err != nil {
		return nil, err // as a backend without tools, structured output, logprobs or n > 1
	}
	if f.err != nil {
		return nil, f.err
	}
	ch := make(chan backends.Event, len(f.pieces)+1)
	for i, p := range f.pieces {
		ch <- backends.Event{Token: int32(i), Text: p}
	}
	last := backends.Event{Token: -1, Done: true, Finish: f.finish,
		Usage: backends.Usage{PromptTokens: len(req.Prompt), CompletionTokens: len(f.pieces), CachedTokens: 2}}
	if f.failWith != nil {
		last.Finish, last.Err = backends.FinishError, f.failWith
	}
	ch <- last
	close(ch)
	return ch, nil
}

type fakeEmbedder struct{}

func (fakeEmbedder) Close() error { return nil }
func (fakeEmbedder) Info() backends.Info {
	return backends.Info{Task: backends.TaskEmbed}
}
func (fakeEmbedder) Size() int64 { return 1 }
func (fakeEmbedder) Slots() int  { return 1 }

func chatServer(t *testing.T, models map[string]cache.Instance) *Server {
	t.Helper()
	resolve := func(_ context.Context, id string) (cache.Spec, error) {
		if _, ok := models[id]; !ok {
			return cache.Spec{}, errors.New("model " + id + " not found")
		}
		return cache.Spec{ID: id, Task: "chat"}, nil
	}
	load := func(_ context.Context, spec cache.Spec) (cache.Instance, error) { return models[spec.ID], nil }
	c, err := cache.New(cache.DefaultConfig(), resolve, load)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: c})
}

func post(t *testing.T, s *Server, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("POST", "http://localhost"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	return w
}

func TestChatCompletion(t *testing.T) {
	m := &fakeChat{pieces: []string{"Hel", "lo"}, finish: backends.FinishStop, template: true, gotReq: make(chan backends.Request, 1)}
	s := chatServer(t, map[string]cache.Instance{"m": m})
	w := post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0,"max_tokens":5,"stop":"x","logit_bias":{"7":-100}}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var resp openai.ChatCompletion
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Object != "chat.completion" || !strings.HasPrefix(resp.ID, "chatcmpl-") || resp.Model != "m" {
		t.Fatalf("envelope = %+v", resp)
	}
	if len(resp.Choices) != 1 || *resp.Choices[0].Message.Content != "Hello" || resp.Choices[0].FinishReason != "stop" || resp.Choices[0].Message.Role != "assistant" {
		t.Fatalf("choices = %+v", resp.Choices)
	}
	prompt := len("<user>hi")
	if u := resp.Usage; u.PromptTokens != prompt || u.CompletionTokens != 2 || u.TotalTokens != prompt+2 || u.PromptTokensDetails.CachedTokens != 2 {
		t.Fatalf("usage = %+v", u)
	}
	if w.Header().Get(core.DeviceHeader) != "cpu" {
		t.Fatalf("device header = %q", w.Header().Get(core.DeviceHeader))
	}
	req := <-m.gotReq
	if req.Sampling.Temperature != 0 || req.MaxTokens != 5 || len(req.Stop) != 1 || req.Sampling.LogitBias[7] != -100 {
		t.Fatalf("engine request = %+v", req)
	}
}

// readSSE returns the data payloads of an event stream.
func readSSE(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			t.Fatalf("not an SSE data line: %q", line)
		}
		out = append(out, strings.TrimPrefix(line, "data: "))
	}
	return out
}

func TestChatCompletionStream(t *testing.T) {
	m := &fakeChat{pieces: []string{"Hel", "", "lo"}, finish: backends.FinishLength, template: true}
	s := chatServer(t, map[string]cache.Instance{"m": m})
	w := post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
	if w.Code != 200 || w.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d type %q", w.Code, w.Header().Get("Content-Type"))
	}
	events := readSSE(t, w.Body.String())
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %v", events)
	}
	var text strings.Builder
	var finish string
	var usage *core.Usage
	for i, e := range events[:len(events)-1] {
		var ch openai.ChatCompletionChunk
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatal(err)
		}
		if ch.Object != "chat.completion.chunk" {
			t.Fatalf("chunk %d object %q", i, ch.Object)
		}
		if i == 0 && (len(ch.Choices) != 1 || ch.Choices[0].Delta.Role != "assistant") {
			t.Fatalf("first chunk lacks the assistant role: %s", e)
		}
		if ch.Usage != nil {
			usage = ch.Usage
			if len(ch.Choices) != 0 {
				t.Fatalf("usage chunk has choices: %s", e)
			}
			continue
		}
		if c := ch.Choices[0]; c.Delta.Content != nil {
			text.WriteString(*c.Delta.Content)
		}
		if f := ch.Choices[0].FinishReason; f != nil {
			finish = *f
		}
	}
	if text.String() != "Hello" || finish != "length" || usage == nil || usage.CompletionTokens != 3 {
		t.Fatalf("text %q finish %q usage %+v", text.String(), finish, usage)
	}
}

func TestCompletionEndpoint(t *testing.T) {
	m := &fakeChat{pieces: []string{" world"}, finish: backends.FinishStop}
	s := chatServer(t, map[string]cache.Instance{"m": m})
	w := post(t, s, "/v1/completions", `{"model":"m","prompt":"hello"}`)
	var resp openai.Completion
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if resp.Object != "text_completion" || resp.Choices[0].Text != " world" || *resp.Choices[0].FinishReason != "stop" || resp.Usage.PromptTokens != 5 {
		t.Fatalf("completion = %+v", resp)
	}
	w = post(t, s, "/v1/completions", `{"model":"m","prompt":"hello","stream":true}`)
	events := readSSE(t, w.Body.String())
	if len(events) != 3 || events[2] != "[DONE]" || !strings.Contains(events[0], `"text":" world"`) {
		t.Fatalf("stream = %v", events)
	}
}

func TestChatErrors(t *testing.T) {
	models := map[string]cache.Instance{
		"m":      &fakeChat{template: true, finish: backends.FinishStop},
		"notmpl": &fakeChat{finish: backends.FinishStop},
		"emb":    fakeEmbedder{},
		"full":   &fakeChat{template: true, err: &backends.ContextOverflowError{PromptTokens: 60, MaxTokens: 10, ContextSize: 64}},
		"busy":   &fakeChat{template: true, err: backends.ErrBusy},
		"queue":  &fakeChat{template: true, err: fmt.Errorf("generate: %w", &backends.BusyError{Reason: "all slots busy", RetryAfter: 3 * time.Second})},
	}
	s := chatServer(t, models)
	cases := []struct {
		body   string
		status int
		want   string
	}{
		{`not json`, 400, "not valid JSON"},
		{``, 400, "body is empty"},
		{`{"model":"m","messages":[]}`, 400, "messages must not be empty"},
		{`{"messages":[{"role":"user","content":"x"}]}`, 400, "model is required"},
		{`{"model":"m","messages":[{"role":"wizard","content":"x"}]}`, 400, `role "wizard"`},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":3,"n":9}`, 400, "temperature 3 is outside [0, 2]; n 9 is outside [1, 8]"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "not fetched"},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]}`, 400, "tools[0] must be"},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]}`, 400, "tools[0].function.parameters must be a JSON Schema object"},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"n":2}`, 400, "this model supports only n=1"},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true}`, 400, "this model does not support logprobs"},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","not":{"required":["a"]}}}}}`, 400, `the keyword "not" (at the schema's root) is not supported`},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}`, 400, "response_format: a json_schema format needs a schema"},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":0}`, 400, "max_tokens must be at least 1"},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"logit_bias":{"abc":1}}`, 400, "not a token id"},
		{`{"model":"notmpl","messages":[{"role":"user","content":"x"}]}`, 400, "use /v1/completions"},
		{`{"model":"emb","messages":[{"role":"user","content":"x"}]}`, 400, "serves embeddings (POST /v1/embeddings), not chat or completions"},
		{`{"model":"full","messages":[{"role":"user","content":"x"}]}`, 400, "context of 64 tokens"},
		{`{"model":"busy","messages":[{"role":"user","content":"x"}]}`, 503, "too many requests"},
	}
	for _, tc := range cases {
		w := post(t, s, "/v1/chat/completions", tc.body)
		e := decodeError(t, w)
		if w.Code != tc.status || !strings.Contains(e.Error.Message, tc.want) {
			t.Errorf("%s: %d %q, want %d containing %q", tc.body, w.Code, e.Error.Message, tc.status, tc.want)
		}
	}
	w := post(t, s, "/v1/chat/completions", `{"model":"full","messages":[{"role":"user","content":"x"}]}`)
	if e := decodeError(t, w); e.Error.Code != "context_length_exceeded" {
		t.Errorf("context overflow code = %v", e.Error.Code)
	}
	w = post(t, s, "/v1/chat/completions", `{"model":"busy","messages":[{"role":"user","content":"x"}]}`)
	if w.Header().Get("Retry-After") == "" {
		t.Errorf("busy without Retry-After")
	}
	// A typed busy error carries its own retry-after and code.
	w = post(t, s, "/v1/chat/completions", `{"model":"queue","messages":[{"role":"user","content":"x"}]}`)
	if e := decodeError(t, w); w.Code != 503 || w.Header().Get("Retry-After") != "3" || e.Error.Code != "model_busy" {
		t.Errorf("typed busy: %d Retry-After %q code %v", w.Code, w.Header().Get("Retry-After"), e.Error.Code)
	}
	// A field the backend cannot honour is a 400 whose param names it.
	w = post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true}`)
	if e := decodeError(t, w); e.Error.Param == nil || *e.Error.Param != "logprobs" {
		t.Errorf("logprobs refusal param = %v", e.Error.Param)
	}
	w = post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"not":{}}}}}`)
	if e := decodeError(t, w); e.Error.Param == nil || *e.Error.Param != "response_format" {
		t.Errorf("schema refusal param = %v", e.Error.Param)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	m := &fakeChat{pieces: []string{"a"}, template: true, failWith: errors.New("runner exited: signal: killed; stderr: ggml abort")}
	s := chatServer(t, map[string]cache.Instance{"m": m})
	w := post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`)
	events := readSSE(t, w.Body.String())
	last := events[len(events)-1]
	if !strings.Contains(last, `"error"`) || !strings.Contains(last, "ggml abort") {
		t.Fatalf("last event = %s", last)
	}
	w = post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	if w.Code != http.StatusInternalServerError || !strings.Contains(decodeError(t, w).Error.Message, "ggml abort") {
		t.Fatalf("non-stream error = %d %s", w.Code, w.Body)
	}
}
