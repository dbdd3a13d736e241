package llama

import (
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

func TestGreedySmoke(t *testing.T) {
	for _, kind := range bothVocabs {
		t.Run(kind.String(), func(t *testing.T) {
			m := openModel(t, ggufgen.Tiny(kind), Options{})
			r := generate(t, m, Request{Prompt: tokenize(t, m, "Hello world"), MaxTokens: 32})
			t.Logf("%q %v %+v", r.text, r.tokens, r.final)
			if r.final.Finish != FinishLength || len(r.tokens) != 32 {
				t.Fatalf("finish %s after %d tokens, want length after 32", r.final.Finish, len(r.tokens))
			}
		})
	}
}
