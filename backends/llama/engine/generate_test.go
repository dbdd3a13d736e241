package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

var prompts = []string{
	"Hello world",
	"The story of the water",
	"What is your number?",
	"people would like to see",
}

// The generated models wander: greedy decoding neither ends at once nor
// repeats one token.
func TestGreedyNotDegenerate(t *testing.T) {
	for _, kind := range bothVocabs {
		t.Run(kind.String(), func(t *testing.T) {
			m := openModel(t, ggufgen.Tiny(kind), Options{Slots: 1})
			for _, p := range prompts {
				r := generate(t, m, Request{Prompt: tokenize(t, m, p), MaxTokens: 32})
				if r.final.Finish != FinishLength || len(r.tokens) != 32 {
					t.Errorf("%q: finish %s after %d tokens, want length after 32", p, r.final.Finish, len(r.tokens))
				}
				distinct := map[int32]bool{}
				for _, id := range r.tokens {
					distinct[id] = true
				}
				if len(distinct) < 8 {
					t.Errorf("%q: only %d distinct tokens in %v", p, len(distinct), r.tokens)
				}
			}
		})
	}
}

func TestGreedyDeterministic(t *testing.T) {
	for _, kind := range bothVocabs {
		t.Run(kind.String(), func(t *testing.T) {
			m := openModel(t, ggufgen.Tiny(kind), Options{Slots: 2})
			prompt := tokenize(t, m, prompts[1])
			a := generate(t, m, Request{Prompt: prompt, MaxTokens: 24})
			b := generate(t, m, Request{Prompt: prompt, MaxTokens: 24})
			if !slices.Equal(a.tokens, b.tokens) || a.text != b.text {
				t.Errorf("two greedy runs differ:\n%v %q\n%v %q", a.tokens, a.text, b.tokens, b.text)
			}
			if a.final.Usage.PromptTokens != len(prompt) || a.final.Usage.CompletionTokens != 24 {
				t.Errorf("usage %+v, want %d prompt and 24 completion tokens", a.final.Usage, len(prompt))
			}
		})
	}
}

func TestSeededSampling(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.SPM), Options{Slots: 2})
	prompt := tokenize(t, m, prompts[0])
	seeded := func(seed int64) []int32 {
		return generate(t, m, Request{Prompt: prompt, MaxTokens: 32, Sampling: Sampling{
			Temperature: 1, TopK: 100, TopP: 0.95, MinP: 0.01, Seed: &seed,
		}}).tokens
	}
	a, b, c := seeded(42), seeded(42), seeded(43)
	if !slices.Equal(a, b) {
		t.Errorf("seed 42 twice gave\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 42 and 43 gave the same tokens %v", a)
	}
	greedy := generate(t, m, Request{Prompt: prompt, MaxTokens: 32}).tokens
	if slices.Equal(a, greedy) {
		t.Error("sampling at temperature 1 gave exactly the greedy tokens")
	}
}

func TestLengthFinish(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.BPE), Options{Slots: 1})
	r := generate(t, m, Request{Prompt: tokenize(t, m, prompts[2]), MaxTokens: 5})
	if r.final.Finish != FinishLength || len(r.tokens) != 5 || r.final.Usage.CompletionTokens != 5 {
		t.Errorf("finish %s, %d tokens, usage %+v; want length, 5, 5", r.final.Finish, len(r.tokens), r.final.Usage)
	}
	if r.final.Token != -1 || r.final.Err != nil {
		t.Errorf("final event %+v", r.final)
	}
}

// A stop string that straddles two tokens ends the generation, neither it
// nor anything after it is emitted, and the final event names it.
func TestStopStringAcrossTokens(t *testing.T) {
	for _, kind := range bothVocabs {
		t.Run(kind.String(), func(t *testing.T) {
			m := openModel(t, ggufgen.Tiny(kind), Options{Slots: 1})
			prompt := tokenize(t, m, prompts[3])
			full := generate(t, m, Request{Prompt: prompt, MaxTokens: 40})
			stop := straddlingStop(t, m, full.tokens)
			r := generate(t, m, Request{Prompt: prompt, MaxTokens: 40, Stop: []string{"never-there", stop}})
			want := full.text[:strings.Index(full.text, stop)]
			if r.final.Finish != FinishStop || r.text != want {
				t.Errorf("stop %q: finish %s, text %q; want stop, %q", stop, r.final.Finish, r.text, want)
			}
			if strings.Contains(r.text, stop) {
				t.Errorf("the stop text %q was emitted", stop)
			}
			if r.final.Stop != stop || full.final.Stop != "" {
				t.Errorf("final events name the stop %q (want %q) and %q (want none)", r.final.Stop, stop, full.final.Stop)
			}
			// Sampling ended with the token that completed the stop string.
			end := strings.Index(full.text, stop) + len(stop)
			n, seen := 0, 0
			for seen < end {
				p, _ := m.TokenPiece(full.tokens[n], false)
				seen += len(p)
				n++
			}
			if got := r.final.Usage.CompletionTokens; got != n {
				t.Errorf("%d tokens sampled, the stop string was complete after %d", got, n)
			}
		})
	}
}

// straddlingStop picks a stop string made of the end of one token's piece
// and the start of the next one's, both printable ASCII.
func straddlingStop(t *testing.T, m *Model, ids []int32) string {
	t.Helper()
	for i := 2; i+1 < len(ids); i++ {
		a, _ := m.TokenPiece(ids[i], false)
		b, _ := m.TokenPiece(ids[i+1], false)
		if len(a) >= 2 && len(b) >= 2 && printable(a) && printable(b) {
			return a[len(a)-2:] + b[:2]
		}
	}
	t.Fatalf("no two neighbouring tokens of two printable bytes or more in %v", ids)
	return ""
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func TestEndOfGeneration(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.SPM), Options{Slots: 1})
	end := tokenize(t, m, ggufgen.IMEnd)
	imEnd := end[len(end)-1]
	r := generate(t, m, Request{Prompt: tokenize(t, m, prompts[0]), MaxTokens: 10,
		Sampling: Sampling{LogitBias: map[int32]float32{imEnd: 100}}})
	if r.final.Finish != FinishStop || len(r.tokens) != 0 || r.text != "" || r.final.Usage.CompletionTokens != 1 {
		t.Errorf("finish %s, tokens %v, text %q, usage %+v; want stop at the first token",
			r.final.Finish, r.tokens, r.text, r.final.Usage)
	}
}

func TestLogitBiasAndPenalties(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.BPE), Options{Slots: 1})
	prompt := tokenize(t, m, prompts[1])
	greedy := generate(t, m, Request{Prompt: prompt, MaxTokens: 8}).tokens
	banned := generate(t, m, Request{Prompt: prompt, MaxTokens: 8,
		Sampling: Sampling{LogitBias: map[int32]float32{greedy[0]: -100}}}).tokens
	if banned[0] == greedy[0] {
		t.Errorf("token %d was banned but came first", greedy[0])
	}
	r := generate(t, m, Request{Prompt: prompt, MaxTokens: 48, Sampling: Sampling{PresencePenalty: 100}})
	seen := map[int32]bool{}
	for _, id := range r.tokens {
		if seen[id] {
			t.Fatalf("token %d repeated despite a presence penalty of 100: %v", id, r.tokens)
		}
		seen[id] = true
	}
}

func TestContextLength(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.SPM), Options{ContextSize: 64, Slots: 1})
	prompt := tokenize(t, m, strings.Repeat("the water ", 20))
	_, err := m.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 30})
	var cle *ContextLengthError
	if !errors.As(err, &cle) {
		t.Fatalf("err = %v, want a *ContextLengthError", err)
	}
	if cle.PromptTokens != len(prompt) || cle.MaxTokens != 30 || cle.ContextSize != 64 {
		t.Errorf("error carries %+v, want prompt %d, max 30, context 64", *cle, len(prompt))
	}
	for _, n := range []string{"64", "30"} {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("message %q lacks %s", err, n)
		}
	}
	// Unset max_tokens takes what is left of the context.
	r := generate(t, m, Request{Prompt: prompt})
	if r.final.Finish != FinishLength || len(r.tokens) != 64-len(prompt) {
		t.Errorf("finish %s after %d tokens, want length after %d", r.final.Finish, len(r.tokens), 64-len(prompt))
	}
	long := tokenize(t, m, strings.Repeat("the water ", 40))
	if _, err := m.Generate(context.Background(), Request{Prompt: long}); !errors.As(err, &cle) || cle.MaxTokens != 0 {
		t.Errorf("a prompt longer than the context: err = %v", err)
	}
}

func TestInvalidRequest(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.SPM), Options{Slots: 1})
	bad := []Request{
		{},
		{Prompt: []int32{1, 99999}},
		{Prompt: []int32{1}, MaxTokens: -1},
		{Prompt: []int32{1}, Sampling: Sampling{Temperature: -1}},
		{Prompt: []int32{1}, Sampling: Sampling{TopP: 1.5}},
		{Prompt: []int32{1}, Sampling: Sampling{LogitBias: map[int32]float32{-3: 1}}},
	}
	for _, req := range bad {
		if _, err := m.Generate(context.Background(), req); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%+v: err = %v, want ErrInvalidRequest", req, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Generate(ctx, Request{Prompt: []int32{1}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: err = %v", err)
	}
}
