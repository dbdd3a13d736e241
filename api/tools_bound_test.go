package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// renderCounter is a chat model that renders its own prompts
// (backends.ChatTokenizer) and counts every call that would render or
// tokenize one, and the tools each generation got.
type renderCounter struct {
	ctxSize  int
	renders  atomic.Int32 // ChatPromptContext, ApplyChatTemplateContext and TokenizeContext calls
	gotTools atomic.Int32 // len(req.Tools) of the last generation
}

func (f *renderCounter) Close() error { return nil }
func (f *renderCounter) Size() int64  { return 1 }
func (f *renderCounter) Slots() int   { return 4 }
func (f *renderCounter) Info() backends.Info {
	return backends.Info{ContextSize: f.ctxSize, ChatTemplate: true, Task: backends.TaskChat}
}
func (f *renderCounter) ChatPromptContext(context.Context, []backends.Message, []backends.Tool, bool) ([]int32, error) {
	f.renders.Add(1)
	return []int32{1, 2, 3}, nil
}
func (f *renderCounter) TokenizeContext(_ context.Context, text string, _, _ bool) ([]int32, error) {
	f.renders.Add(1)
	return make([]int32, len(text)), nil
}
func (f *renderCounter) DetokenizeContext(context.Context, []int32, bool) (string, error) {
	return "", nil
}
func (f *renderCounter) ApplyChatTemplateContext(context.Context, []backends.Message, bool) (string, error) {
	f.renders.Add(1)
	return "x", nil
}
func (f *renderCounter) Generate(_ context.Context, req backends.Request) (<-chan backends.Event, error) {
	f.gotTools.Store(int32(len(req.Tools)))
	ch := make(chan backends.Event, 2)
	ch <- backends.Event{Token: 7, Text: "ok"}
	ch <- backends.Event{Token: -1, Done: true, Finish: backends.FinishStop, Usage: backends.Usage{PromptTokens: len(req.Prompt), CompletionTokens: 1}}
	close(ch)
	return ch, nil
}

// toolDef is one tool in OpenAI's flat shape: name, description and a
// parameters schema whose one property has a description of desc bytes.
type toolDef struct {
	name, desc string
	params     json.RawMessage
}

func makeTools(n, descBytes int) []toolDef {
	out := make([]toolDef, n)
	for i := range out {
		params, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{
			"path": map[string]any{"type": "string", "description": strings.Repeat("p", descBytes/2)},
		}, "required": []string{"path"}})
		out[i] = toolDef{name: fmt.Sprintf("tool_%d", i), desc: strings.Repeat("d", descBytes-descBytes/2), params: params}
	}
	return out
}

// toolsBody is a chat request offering tools in the shape of the dialect
// of path.
func toolsBody(path string, tools []toolDef, prompt string) string {
	var list []any
	for _, t := range tools {
		fn := map[string]any{"name": t.name, "description": t.desc, "parameters": t.params}
		switch path {
		case "/v1/messages":
			list = append(list, map[string]any{"name": t.name, "description": t.desc, "input_schema": t.params})
		case "/v1/responses":
			list = append(list, map[string]any{"type": "function", "name": t.name, "description": t.desc, "parameters": t.params})
		default:
			list = append(list, map[string]any{"type": "function", "function": fn})
		}
	}
	msgs := []any{map[string]string{"role": "user", "content": prompt}}
	body := map[string]any{"model": "chat", "tools": list}
	switch path {
	case "/v1/messages":
		body["messages"], body["max_tokens"] = msgs, 16
	case "/v1/responses":
		body["input"] = prompt
	case "/api/chat":
		body["messages"], body["stream"] = msgs, false
	default:
		body["messages"] = msgs
	}
	return jsonOf(body)
}

// errorText is the message of an error in any dialect's shape, and its
// param where the shape has one.
func errorText(t *testing.T, w interface{ Bytes() []byte }) (msg, param string, nPrompt, nCtx int) {
	t.Helper()
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(w.Bytes(), &body); err != nil {
		t.Fatalf("error body %s: %v", core.Clip(string(w.Bytes())), err)
	}
	if json.Unmarshal(body.Error, &msg) == nil {
		return msg, "", 0, 0 // Ollama: {"error": "..."}
	}
	var e struct {
		Message       string  `json:"message"`
		Param         *string `json:"param"`
		NPromptTokens int     `json:"n_prompt_tokens"`
		NCtx          int     `json:"n_ctx"`
	}
	if err := json.Unmarshal(body.Error, &e); err != nil {
		t.Fatalf("error %s: %v", core.Clip(string(body.Error)), err)
	}
	if e.Param != nil {
		param = *e.Param
	}
	return e.Message, param, e.NPromptTokens, e.NCtx
}

var toolDialects = []string{"/v1/chat/completions", "/v1/messages", "/v1/responses", "/api/chat"}

// TestHugeToolsRefusedBeforeRendering: megabytes of tool definitions
// (under the body bound) offered to a model of 2048 tokens are refused in
// every dialect as context_length_exceeded on tools, with the least prompt
// and the context, before the model is loaded or anything is rendered or
// tokenized; tools that fit the daemon's context but not the loaded
// model's are refused before rendering too. Before, the runner rendered and
// tokenized the whole list first (3.7–19 s and up to +575 MiB a request
// for 11–16 MB).
func TestHugeToolsRefusedBeforeRendering(t *testing.T) {
	// A daemon of 2048 tokens: its body bound is 7 MiB.
	small := &renderCounter{ctxSize: 2048}
	s, loads := limitServer(t, map[string]cache.Instance{"chat": small}, Options{ContextCap: 2048})
	s.RegisterOllama(core.ModelsOptions{})
	huge := makeTools(24, 128<<10) // 3 MiB of names, descriptions and schema text
	for _, path := range toolDialects {
		body := toolsBody(path, huge, "hi")
		if len(body) < 3<<20 || int64(len(body)) > core.PromptBodyBound(s.ContextCap()) {
			t.Fatalf("%s: body of %d bytes", path, len(body))
		}
		w := post(t, s, path, body)
		if w.Code != http.StatusBadRequest {
			t.Fatalf("%s: status %d: %s", path, w.Code, core.Clip(w.Body.String()))
		}
		msg, param, nPrompt, nCtx := errorText(t, w.Body)
		if !strings.Contains(msg, "tools") || !strings.Contains(msg, "context of 2048 tokens") {
			t.Errorf("%s: %s", path, core.Clip(msg))
		}
		if path == "/v1/chat/completions" || path == "/v1/responses" {
			if want := core.MinPromptTokens(core.ToolPromptBytes(backendTools(huge))); param != "tools" || nPrompt != want || nCtx != 2048 {
				t.Errorf("%s: param %q n_prompt_tokens %d n_ctx %d, want tools, %d, 2048", path, param, nPrompt, nCtx, want)
			}
		}
	}
	if n := loads.Load(); n != 0 || small.renders.Load() != 0 {
		t.Errorf("%d loads, %d renders for tools that fit no context", n, small.renders.Load())
	}

	// The default daemon (8192 tokens) with a model of 2048.
	chat := &renderCounter{ctxSize: 2048}
	s, _ = limitServer(t, map[string]cache.Instance{"chat": chat}, Options{})
	s.RegisterOllama(core.ModelsOptions{})
	// 1 MiB of tools: at least 4096 tokens, more than the model's 2048.
	big := makeTools(8, 128<<10)
	for _, path := range toolDialects {
		w := post(t, s, path, toolsBody(path, big, "hi"))
		if w.Code != http.StatusBadRequest {
			t.Fatalf("%s: status %d: %s", path, w.Code, core.Clip(w.Body.String()))
		}
		msg, param, _, nCtx := errorText(t, w.Body)
		if !strings.Contains(msg, "tools") || !strings.Contains(msg, "context of 2048 tokens") {
			t.Errorf("%s: %s", path, msg)
		}
		if path == "/v1/chat/completions" && (param != "tools" || nCtx != 2048) {
			t.Errorf("%s: param %q n_ctx %d", path, param, nCtx)
		}
	}
	// Tools and messages that fit alone but not together: on messages.
	half := makeTools(3, 128<<10)
	w := post(t, s, "/v1/chat/completions", toolsBody("/v1/chat/completions", half, strings.Repeat("m", 256<<10)))
	wantError(t, w, http.StatusBadRequest, "messages", "the messages (", "context of 2048 tokens")
	if n := chat.renders.Load(); n != 0 {
		t.Errorf("%d render or tokenize calls for tools that cannot fit", n)
	}
}

// TestLargeToolsThatFitWork: a long but legitimate tools list (128 tools,
// 300 KiB, at least 1200 tokens) on a model of 2048 tokens is rendered and
// generated with, in every dialect.
func TestLargeToolsThatFitWork(t *testing.T) {
	chat := &renderCounter{ctxSize: 2048}
	s, _ := limitServer(t, map[string]cache.Instance{"chat": chat}, Options{})
	s.RegisterOllama(core.ModelsOptions{})
	tools := makeTools(core.MaxTools, 2300)
	if n := core.MinPromptTokens(core.ToolPromptBytes(backendTools(tools))); n < 1100 || n > 2000 {
		t.Fatalf("the tools are at least %d tokens", n)
	}
	for _, path := range toolDialects {
		before := chat.renders.Load()
		w := post(t, s, path, toolsBody(path, tools, "hi"))
		if w.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", path, w.Code, core.Clip(w.Body.String()))
		}
		if chat.renders.Load() == before || chat.gotTools.Load() != core.MaxTools {
			t.Errorf("%s: rendered %d times, generated with %d tools", path, chat.renders.Load()-before, chat.gotTools.Load())
		}
	}
}

func backendTools(ts []toolDef) []backends.Tool {
	out := make([]backends.Tool, len(ts))
	for i, t := range ts {
		out[i] = backends.Tool{Name: t.name, Description: t.desc, Parameters: t.params}
	}
	return out
}

// TestToolPromptBytes: the count is the tools' text — names, descriptions,
// the schema's keys and strings, an escape as one byte — and never more
// than the compact JSON a template's tojson writes of them.
func TestToolPromptBytes(t *testing.T) {
	tools := []backends.Tool{{Name: "get", Description: "fetch", Parameters: json.RawMessage(`{"type": "object", "properties": {"u\u00e9": {"type":"string","description":"a\"b\n"}}, "required": ["u"], "minItems": 3}`)}}
	// keys and strings: type object properties ué(escaped: 1+1) type string description a"b\n(4) required u minItems
	want := len("get") + len("fetch") + len("type") + len("object") + len("properties") + 2 + len("type") + len("string") + len("description") + 4 + len("required") + 1 + len("minItems")
	if got := core.ToolPromptBytes(tools); got != want {
		t.Errorf("toolPromptBytes = %d, want %d", got, want)
	}
	var v any
	if err := json.Unmarshal(tools[0].Parameters, &v); err != nil {
		t.Fatal(err)
	}
	compact, _ := json.Marshal(map[string]any{"name": tools[0].Name, "description": tools[0].Description, "parameters": v})
	if got := core.ToolPromptBytes(tools); got > len(compact) {
		t.Errorf("counted %d bytes, more than the %d of the compact JSON", got, len(compact))
	}
}

// TestTemplateKwargsCounted: chat_template_kwargs reach the template (a
// template's documents), so their text counts in the early bound: 15 MiB
// of documents are refused on chat_template_kwargs before any model is
// loaded, and a small one passes.
func TestTemplateKwargsCounted(t *testing.T) {
	chat := &renderCounter{ctxSize: 2048}
	s, loads := limitServer(t, map[string]cache.Instance{"chat": chat}, Options{Limits: Limits{MaxBody: 64 << 20}})
	docs := make([]any, 120)
	for i := range docs {
		docs[i] = map[string]any{"title": fmt.Sprint(i), "text": strings.Repeat("t", 128<<10)}
	}
	body := jsonOf(map[string]any{"model": "chat", "messages": []any{map[string]string{"role": "user", "content": "hi"}},
		"chat_template_kwargs": map[string]any{"documents": docs}})
	wantError(t, post(t, s, "/v1/chat/completions", body), http.StatusBadRequest, "chat_template_kwargs", "context of 8192 tokens")
	if n := loads.Load(); n != 0 || chat.renders.Load() != 0 {
		t.Errorf("%d loads, %d renders", n, chat.renders.Load())
	}
	body = jsonOf(map[string]any{"model": "chat", "messages": []any{map[string]string{"role": "user", "content": "hi"}},
		"chat_template_kwargs": map[string]any{"enable_thinking": false, "documents": docs[:2]}})
	if w := post(t, s, "/v1/chat/completions", body); w.Code != http.StatusOK {
		t.Errorf("small kwargs: %d %s", w.Code, core.Clip(w.Body.String()))
	}
}
