package engine

import (
	"math"
	"slices"
	"strings"
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

// rewritePrompt asks for a passage back: the output of a model that copies
// (the trained one, and random ones that loop) is what prompt lookup drafts.
const rewritePassage = "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. " +
	"One day, she saw a big red ball in the park. She ran to the ball and kicked it very hard. " +
	"The ball flew up into the sky and landed in a tree. Lily was sad because she could not reach it."

var lookupPrompts = []string{
	rewritePassage + "\n\nSay it again:\n" + rewritePassage[:60],
	"Hello world, tell me a story about the water",
	"Once upon a time",
}

// openLookup opens path with prompt lookup's draft size lookup and hooks h.
func openLookup(t *testing.T, path string, lookup int, h Hooks) *Model {
	t.Helper()
	initLib(t)
	m, err := open(path, Options{Slots: 2, ContextSize: 1024, Lookup: lookup}, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return m
}

// lookupPair opens path twice, with prompt lookup off and on.
func lookupPair(t *testing.T, path string) (plain, spec *Model) {
	t.Helper()
	return openLookup(t, path, 0, Hooks{}), openLookup(t, path, DefaultLookup, Hooks{})
}

// Greedy output is the same token for token with prompt lookup and without
// it, on random-weight models of both generated vocabularies, on the F16
// benchmark model, on random models carrying real vocabularies, and on the
// trained model, whose rewrite of a passage the lookup drafts and keeps.
func TestLookupGreedyIdentical(t *testing.T) {
	type model struct {
		name string
		path func(t *testing.T) string
	}
	gen := func(o ggufgen.Options) func(t *testing.T) string {
		return func(t *testing.T) string { return genModel(t, o) }
	}
	real := func(vocab, tmpl string) func(t *testing.T) string {
		return func(t *testing.T) string { return testenv.LlamaChatModel(t, vocab, tmpl) }
	}
	models := []model{
		{"tiny-spm", gen(ggufgen.Tiny(ggufgen.SPM))},
		{"tiny-bpe", gen(ggufgen.Tiny(ggufgen.BPE))},
		{"bench-f16", gen(ggufgen.Bench(ggufgen.SPM))},
		{"qwen2", real("qwen2", "Qwen-Qwen2.5-7B-Instruct")},
		{"llama-bpe", real("llama-bpe", "meta-llama-Llama-3.1-8B-Instruct")},
		{"phi-3", real("phi-3", "microsoft-Phi-3.5-mini-instruct")},
		{"stories260K", trainedModel},
	}
	for _, md := range models {
		t.Run(md.name, func(t *testing.T) {
			plain, spec := lookupPair(t, md.path(t))
			for _, p := range lookupPrompts {
				prompt := tokenize(t, plain, p)
				want := generate(t, plain, Request{Prompt: prompt, MaxTokens: 200})
				got := generate(t, spec, Request{Prompt: prompt, MaxTokens: 200})
				if !slices.Equal(got.tokens, want.tokens) || got.text != want.text {
					t.Errorf("prompt %.30q: with lookup\n%v\nwithout\n%v", p, got.tokens, want.tokens)
				}
				if got.final.Finish != want.final.Finish || got.final.Usage != want.final.Usage {
					t.Errorf("prompt %.30q: with lookup finish %s, %+v; without %s, %+v", p,
						got.final.Finish, got.final.Usage, want.final.Finish, want.final.Usage)
				}
			}
			ps, ss := plain.Stats(), spec.Stats()
			if ps.DraftTokens != 0 {
				t.Errorf("lookup off drafted %d tokens", ps.DraftTokens)
			}
			if ss.AcceptedTokens > ss.DraftTokens {
				t.Errorf("kept %d of %d drafted tokens", ss.AcceptedTokens, ss.DraftTokens)
			}
			if md.name == "stories260K" && (ss.AcceptedTokens == 0 || ss.DecodeCalls >= ps.DecodeCalls) {
				t.Errorf("the trained model's rewrite: %d decode calls with lookup, %d without; %d kept", ss.DecodeCalls, ps.DecodeCalls, ss.AcceptedTokens)
			}
			t.Logf("decode calls %d -> %d; %d drafts, %d tokens drafted, %d kept", ps.DecodeCalls, ss.DecodeCalls, ss.Drafts, ss.DraftTokens, ss.AcceptedTokens)
		})
	}
}

// Seeded sampling on the trained model draws from the same distribution
// with prompt lookup and without: up to the first token where the two
// texts part, every position's log-probabilities (the drawn token's and the
// top alternatives') agree to rounding, kept drafts included, so the KV of
// rejected drafts was dropped and the repeat penalty saw the same history.
// The texts themselves may part: the logits of a drafted position come from
// a step of several tokens, whose kernels round differently (about 1e-3
// nats here), and a seeded draw that lands that close to the boundary
// between two tokens picks the other one (7 of 80 seeded runs of 150 tokens
// on the machine this was measured on). That each emitted token takes
// exactly one draw, whatever the drafts, is checked exactly on a model whose
// numbers do not depend on the step (TestLookupSchedulerSeeded).
func TestLookupSeededSameDistribution(t *testing.T) {
	plain, spec := lookupPair(t, trainedModel(t))
	const tol = 0.02 // nats; the rounding measured is below 0.003
	same := 0
	for _, seed := range []int64{1, 2, 3, 42} {
		for _, p := range lookupPrompts[:2] {
			req := Request{MaxTokens: 150, Logprobs: true, TopLogprobs: 3,
				Sampling: Sampling{Temperature: 0.7, TopK: 40, Seed: &seed, RepeatPenalty: 1.1}}
			req.Prompt = tokenize(t, plain, p)
			w, g := generate(t, plain, req), generate(t, spec, req)
			want, wantLP, got, gotLP := w.tokens, w.logprobs, g.tokens, g.logprobs
			// Where the texts part, either may end first (a draw of the
			// end-of-text token is a draw like any other).
			i := 0
			for ; i < min(len(got), len(want)) && got[i] == want[i]; i++ {
				if d := logprobsApart(gotLP[i], wantLP[i], tol); d > tol {
					t.Errorf("seed %d, prompt %.30q, token %d: log-probabilities %g nats apart with lookup and without", seed, p, i, d)
					break
				}
			}
			if i == len(want) && len(got) == len(want) {
				same++
			}
			t.Logf("seed %d, prompt %.30q: the same %d of %d tokens", seed, p, i, len(want))
		}
	}
	st := spec.Stats()
	if st.AcceptedTokens == 0 {
		t.Errorf("no drafted token kept under sampling (%d drafted)", st.DraftTokens)
	}
	t.Logf("%d of 8 runs the same text; %d of %d drafted tokens kept", same, st.AcceptedTokens, st.DraftTokens)
}

// logprobsApart is how far apart a and b are: the largest difference of
// the drawn token's log-probability and of the alternatives both list; an
// alternative only one lists must be within tol of the other's last (a
// near tie at the cut), else, or when either is missing, +Inf.
func logprobsApart(a, b *Logprobs, tol float64) float64 {
	if a == nil || b == nil || len(a.Top) == 0 || len(b.Top) == 0 {
		return math.Inf(1)
	}
	d := math.Abs(float64(a.Logprob - b.Logprob))
	for _, pair := range [][2]*Logprobs{{a, b}, {b, a}} {
		x, y := pair[0], pair[1]
		for _, tx := range x.Top {
			i := slices.IndexFunc(y.Top, func(ty backends.TokenLogprob) bool { return ty.ID == tx.ID })
			switch {
			case i >= 0:
				d = max(d, math.Abs(float64(tx.Logprob-y.Top[i].Logprob)))
			case math.Abs(float64(tx.Logprob-y.Top[len(y.Top)-1].Logprob)) > tol:
				return math.Inf(1)
			}
		}
	}
	return d
}

// A request's Speculative false keeps the model's lookup from drafting for
// it, and true drafts on a model whose lookup is off.
func TestLookupPerRequest(t *testing.T) {
	plain, spec := lookupPair(t, trainedModel(t))
	prompt := tokenize(t, spec, lookupPrompts[0])
	off, on := false, true
	generate(t, spec, Request{Prompt: prompt, MaxTokens: 100, Speculative: &off})
	if st := spec.Stats(); st.Drafts != 0 {
		t.Errorf("speculative false: %d drafts", st.Drafts)
	}
	generate(t, plain, Request{Prompt: prompt, MaxTokens: 100, Speculative: &on})
	if st := plain.Stats(); st.Drafts == 0 {
		t.Error("speculative true on a model with lookup off: no draft")
	}
}

func TestDraftFrom(t *testing.T) {
	toks := func(s string) []yz.Token {
		var out []yz.Token
		for _, f := range strings.Fields(s) {
			out = append(out, yz.Token(f[0]))
		}
		return out
	}
	cases := []struct {
		hist string
		max  int
		want string
	}{
		{"a b c d e a b", 3, "c d e"},
		{"a b c d e a b", 1, "c"},
		{"a b c d x b c d y b c d", 2, "y b"}, // the latest occurrence
		{"p q c d r s a b c d", 4, "r s a b"}, // the longest n that occurs
		{"a b c a b d z b", 3, ""},            // one token is not a match
		{"a b c d e f", 3, ""},                // nothing repeats
		{"a b a b", 8, "a b"},                 // stops at the history's end
		{"a b c a b", 0, ""},                  // max 0
		{"b", 3, ""},                          // too short
		{"x y z x y z x y", 4, "z x y"},       // overlapping copy
		{"a b c d a b c d a b c d e a b c d", 2, "e a"},
	}
	for _, c := range cases {
		hist := toks(c.hist)
		got := draftFrom(hist, c.max)
		if !slices.Equal(got, toks(c.want)) {
			t.Errorf("draftFrom(%q, %d) = %v, want %q", c.hist, c.max, got, c.want)
		}
	}
}

// A request whose drafts are mostly wrong stops drafting after a window;
// one whose drafts are kept goes on.
func TestLookupTurnsOff(t *testing.T) {
	l := newLookup(8, nil)
	for i := 0; i < 3; i++ {
		l.note(8, 3)
	}
	if !l.on {
		t.Fatal("off after less than a window")
	}
	l.note(8, 3) // 12 of 32 kept: above the bar
	if !l.on {
		t.Fatal("off at 12 of 32 kept")
	}
	for i := 0; i < 4; i++ {
		l.note(8, 2) // 8 of 32
	}
	if l.on {
		t.Fatal("still on at 8 of 32 kept")
	}
	off := false
	if newLookup(8, &off).on || newLookup(0, nil).on {
		t.Error("lookup on where the model or the request turned it off")
	}
	on := true
	if l := newLookup(0, &on); !l.on || l.max != DefaultLookup {
		t.Errorf("speculative true on a model with lookup off: %+v", l)
	}
}
