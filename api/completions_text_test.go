package api

import (
	"strings"
	"testing"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// textChat is fakeChat as a backend that tokenizes a raw prompt in its
// Generate call (backends.TextGenerator).
type textChat struct{ *fakeChat }

func (textChat) TokenizesText() {}

// A raw prompt (/v1/completions; Ollama's raw generate takes the same
// path, core.StartText) goes to a TextGenerator as its text alone, never tokenized
// first; a plain Tokenizer still gets the tokens with it. An empty prompt
// is refused before either sees it, and a text too long for the context,
// refused by the backend, names the prompt.
func TestCompletionTextToTextGenerator(t *testing.T) {
	plain := &fakeChat{pieces: []string{" world"}, finish: backends.FinishStop, gotReq: make(chan backends.Request, 4)}
	inCall := textChat{&fakeChat{pieces: []string{" world"}, finish: backends.FinishStop, gotReq: make(chan backends.Request, 4)}}
	over := textChat{&fakeChat{err: &backends.ContextOverflowError{PromptTokens: 90, ContextSize: 64}}}
	var _ backends.TextGenerator = inCall
	s := chatServer(t, map[string]cache.Instance{"plain": plain, "text": inCall, "over": over})

	if w := post(t, s, "/v1/completions", `{"model":"text","prompt":"hello <b>","max_tokens":4}`); w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if req := <-inCall.gotReq; req.Text != "hello <b>" || req.Prompt != nil {
		t.Errorf("the TextGenerator got text %q and %d tokens, want the text alone", req.Text, len(req.Prompt))
	}
	if w := post(t, s, "/v1/completions", `{"model":"plain","prompt":"hello","max_tokens":4}`); w.Code != 200 {
		t.Fatalf("plain: status %d: %s", w.Code, w.Body)
	}
	if req := <-plain.gotReq; req.Text != "hello" || len(req.Prompt) != 5 {
		t.Errorf("a Tokenizer got text %q and %d tokens, want both", req.Text, len(req.Prompt))
	}

	w := post(t, s, "/v1/completions", `{"model":"text","prompt":"","max_tokens":4}`)
	if w.Code != 400 || !strings.Contains(w.Body.String(), `"param":"prompt"`) {
		t.Errorf("an empty prompt: %d %s", w.Code, w.Body)
	}
	select {
	case req := <-inCall.gotReq:
		t.Errorf("an empty prompt reached the backend: %+v", req)
	default:
	}
	w = post(t, s, "/v1/completions", `{"model":"over","prompt":"hello","max_tokens":4}`)
	if w.Code != 400 || !strings.Contains(w.Body.String(), `"param":"prompt"`) {
		t.Errorf("a text over the context: %d %s", w.Code, w.Body)
	}
}
