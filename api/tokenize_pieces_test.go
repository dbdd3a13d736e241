package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// spmWords is a SentencePiece-like tokenizer: each word is one token whose
// piece carries the word's leading space ("▁world"), and detokenizing drops
// the space of the first token, as llama.cpp does for SentencePiece.
type spmWords struct{ *fakeChat }

var spmVocab = []string{"▁Hello", "▁world", ",", "▁Grüße"}

func (spmWords) TokenizeContext(_ context.Context, text string, _, _ bool) ([]int32, error) {
	var ids []int32
	rest := " " + text
	for rest != "" {
		found := false
		for id, p := range spmVocab {
			if w := strings.ReplaceAll(p, "▁", " "); strings.HasPrefix(rest, w) {
				ids, rest, found = append(ids, int32(id)), rest[len(w):], true
				break
			}
		}
		if !found {
			return nil, context.Canceled
		}
	}
	return ids, nil
}

func (spmWords) DetokenizeContext(_ context.Context, ids []int32, _ bool) (string, error) {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(strings.ReplaceAll(spmVocab[id], "▁", " "))
	}
	return strings.TrimPrefix(b.String(), " "), nil
}

// TestTokenizePiecesKeepWordSpaces: with_pieces gives each token what it
// adds to the text, so a SentencePiece word keeps its space and the pieces
// join to the text; with_prompt gives the tokens' text.
func TestTokenizePiecesKeepWordSpaces(t *testing.T) {
	s := chatServer(t, map[string]cache.Instance{"spm": spmWords{&fakeChat{template: true}}})
	w := post(t, s, "/v1/tokenize", `{"model":"spm","content":"Hello world, Grüße","with_pieces":true,"with_prompt":true}`)
	var p struct {
		Tokens []struct {
			ID    int32  `json:"id"`
			Piece string `json:"piece"`
		} `json:"tokens"`
		Prompt *string `json:"prompt"`
	}
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &p) != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var joined strings.Builder
	var pieces []string
	for _, tok := range p.Tokens {
		joined.WriteString(tok.Piece)
		pieces = append(pieces, tok.Piece)
	}
	if joined.String() != "Hello world, Grüße" {
		t.Errorf("pieces %q join to %q", pieces, joined.String())
	}
	if len(pieces) != 4 || pieces[1] != " world" {
		t.Errorf("pieces %q, want the second to keep its space", pieces)
	}
	if p.Prompt == nil || *p.Prompt != "Hello world, Grüße" {
		t.Errorf("prompt %v", p.Prompt)
	}
}

// TestPastReasoningReachesTheTemplate: an assistant turn's
// reasoning_content goes to the backend's message (the chat template then
// keeps, wraps or drops it); a user's is not read.
func TestPastReasoningReachesTheTemplate(t *testing.T) {
	plain := &fakeChat{template: true, finish: "stop", gotReq: make(chan backends.Request, 1)}
	s := chatServer(t, map[string]cache.Instance{"plain": plain})
	w := post(t, s, "/v1/chat/completions", `{"model":"plain","messages":[{"role":"user","content":"q","reasoning_content":"no"},{"role":"assistant","content":"a","reasoning_content":"because"},{"role":"user","content":"more"}]}`)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	got := <-plain.gotReq
	if len(got.Messages) != 3 || got.Messages[1].Reasoning != "because" || got.Messages[0].Reasoning != "" {
		t.Errorf("messages %+v", got.Messages)
	}
}
