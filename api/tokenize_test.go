package api

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modeld/modeld/api/openai"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// fakeChatTok is a fakeChat that renders and tokenizes conversations in one
// step (backends.ChatTokenizer): one id per message, 1000 + its index, and
// one per tool, 2000 + its index.
type fakeChatTok struct {
	*fakeChat
	tools chan []backends.Tool
}

func (f *fakeChatTok) ChatPromptContext(_ context.Context, msgs []backends.Message, tools []backends.Tool, _ bool) ([]int32, error) {
	if f.tools != nil {
		f.tools <- tools
	}
	var ids []int32
	for i := range msgs {
		ids = append(ids, int32(1000+i))
	}
	for i := range tools {
		ids = append(ids, int32(2000+i))
	}
	return ids, nil
}

type tokenizeBody struct {
	Tokens json.RawMessage `json:"tokens"`
	Count  int             `json:"count"`
	Model  string          `json:"model"`
}

func tokenizeOK(t *testing.T, s *Server, body string) []int32 {
	t.Helper()
	w := post(t, s, "/v1/tokenize", body)
	if w.Code != 200 {
		t.Fatalf("%s: %d %s", body, w.Code, w.Body)
	}
	var out tokenizeBody
	var ids []int32
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || json.Unmarshal(out.Tokens, &ids) != nil {
		t.Fatalf("%s: %s", body, w.Body)
	}
	if out.Count != len(ids) || out.Model == "" {
		t.Fatalf("%s: count %d for %d ids, model %q", body, out.Count, len(ids), out.Model)
	}
	return ids
}

// TestTokenize: text is tokenized by the model's Tokenizer; a conversation
// gives the ids a chat generation gets as its prompt (the same path), through
// ChatPromptContext when the model has it, with the tools unless tool_choice
// is none; detokenize and with_pieces (bytes that are not UTF-8 as an array).
func TestTokenize(t *testing.T) {
	plain := &fakeChat{template: true, finish: backends.FinishStop, gotReq: make(chan backends.Request, 1)}
	one := &fakeChatTok{fakeChat: &fakeChat{template: true, finish: backends.FinishStop, gotReq: make(chan backends.Request, 1)}, tools: make(chan []backends.Tool, 1)}
	s := chatServer(t, map[string]cache.Instance{"plain": plain, "one": one, "emb": fakeEmbedder{}})

	if ids := tokenizeOK(t, s, `{"model":"plain","content":"ab"}`); !slices.Equal(ids, []int32{'a', 'b'}) {
		t.Errorf("content: %v", ids)
	}
	if ids := tokenizeOK(t, s, `{"model":"plain","input":"c"}`); !slices.Equal(ids, []int32{'c'}) {
		t.Errorf("input: %v", ids)
	}

	conv := `"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]`
	ids := tokenizeOK(t, s, `{"model":"plain",`+conv+`}`)
	if want := []int32("<system>s<user>hi"); !slices.Equal(ids, want) {
		t.Errorf("plain conversation: %v, want %v", ids, want)
	}
	w := post(t, s, "/v1/chat/completions", `{"model":"plain",`+conv+`}`)
	if w.Code != 200 {
		t.Fatalf("chat: %d %s", w.Code, w.Body)
	}
	if got := <-plain.gotReq; !slices.Equal(got.Prompt, ids) {
		t.Errorf("the chat's prompt %v, tokenize %v", got.Prompt, ids)
	}

	tools := `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	ids = tokenizeOK(t, s, `{"model":"one",`+conv+`,`+tools+`}`)
	if !slices.Equal(ids, []int32{1000, 1001, 2000}) {
		t.Errorf("ChatTokenizer conversation: %v", ids)
	}
	if got := <-one.tools; len(got) != 1 || got[0].Name != "f" {
		t.Errorf("tools given to the template: %+v", got)
	}
	ids = tokenizeOK(t, s, `{"model":"one",`+conv+`,`+tools+`,"tool_choice":"none"}`)
	if got := <-one.tools; len(got) != 0 || !slices.Equal(ids, []int32{1000, 1001}) {
		t.Errorf("tool_choice none: tools %+v, ids %v", got, ids)
	}
	w = post(t, s, "/v1/chat/completions", `{"model":"one",`+conv+`}`)
	if w.Code != 200 {
		t.Fatalf("chat: %d %s", w.Code, w.Body)
	}
	<-one.tools
	if got := <-one.gotReq; !slices.Equal(got.Prompt, []int32{1000, 1001}) {
		t.Errorf("the chat's prompt through ChatTokenizer: %v", got.Prompt)
	}

	w = post(t, s, "/v1/detokenize", `{"model":"plain","tokens":[104,105]}`)
	var d openai.DetokenizeResponse
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &d) != nil || d.Content != "hi" || d.Model != "plain" {
		t.Errorf("detokenize: %d %s", w.Code, w.Body)
	}

	w = post(t, s, "/v1/tokenize", `{"model":"plain","content":"a\u00e9","with_pieces":true}`)
	var p struct {
		Tokens []struct {
			ID    int32 `json:"id"`
			Piece any   `json:"piece"`
		} `json:"tokens"`
		Count int `json:"count"`
	}
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &p) != nil || p.Count != 3 || len(p.Tokens) != 3 {
		t.Fatalf("with_pieces: %d %s", w.Code, w.Body)
	}
	if p.Tokens[0].Piece != "a" || p.Tokens[0].ID != 'a' {
		t.Errorf("piece 0: %+v", p.Tokens[0])
	}
	if b, ok := p.Tokens[1].Piece.([]any); !ok || len(b) != 1 || b[0] != float64(0xc3) {
		t.Errorf("a byte that is not UTF-8 is not an array: %+v", p.Tokens[1])
	}

	for body, want := range map[string]string{
		`{"model":"plain"}`:                                 "send content",
		`{"model":"plain","content":"x","input":"y"}`:       "send one of",
		`{"model":"plain","content":"x",` + conv + `}`:      "send one of",
		`{"model":"plain",` + conv + `,"add_special":true}`: "apply to content",
		`{"model":"plain","content":"x",` + tools + `}`:     "tools go with messages",
		`{"model":"emb","content":"x"}`:                     "tokenizer",
		`{"content":"x"}`:                                   "model is required",
	} {
		w := post(t, s, "/v1/tokenize", body)
		if e := decodeError(t, w); w.Code != 400 || !strings.Contains(e.Error.Message, want) {
			t.Errorf("%s: %d %q, want 400 containing %q", body, w.Code, e.Error.Message, want)
		}
	}
	w = post(t, s, "/v1/detokenize", `{"model":"emb","tokens":[1]}`)
	if w.Code != 400 {
		t.Errorf("detokenize on a model without a tokenizer: %d %s", w.Code, w.Body)
	}
}

// TestContextOverflowFields: context_length_exceeded has n_prompt_tokens and
// n_ctx at the top of the error object, as llama.cpp's server has them;
// other errors do not.
func TestContextOverflowFields(t *testing.T) {
	s := chatServer(t, map[string]cache.Instance{
		"full": &fakeChat{template: true, err: &backends.ContextOverflowError{PromptTokens: 60, MaxTokens: 10, ContextSize: 64}},
		"m":    &fakeChat{template: true, finish: backends.FinishStop},
	})
	w := post(t, s, "/v1/chat/completions", `{"model":"full","messages":[{"role":"user","content":"x"}]}`)
	var e struct {
		Error map[string]any `json:"error"`
	}
	if w.Code != 400 || json.Unmarshal(w.Body.Bytes(), &e) != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if e.Error["code"] != "context_length_exceeded" || e.Error["n_prompt_tokens"] != float64(60) || e.Error["n_ctx"] != float64(64) {
		t.Errorf("overflow error object: %v", e.Error)
	}
	w = post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"wizard","content":"x"}]}`)
	e.Error = nil
	if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error["n_prompt_tokens"] != nil || e.Error["n_ctx"] != nil {
		t.Errorf("another error carries the overflow fields: %s", w.Body)
	}
}
