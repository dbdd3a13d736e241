package engine

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/grammar"
	"github.com/modeld/modeld/internal/ggufgen"
)

// refContext evaluates tokens one decode at a time in a context of its own
// (one sequence), as the engine's scheduler does for a lone request: the
// prompt in one batch, then each generated token alone.
type refContext struct {
	t      *testing.T
	lctx   yz.Context
	batch  yz.Batch
	nVocab int
	pos    int
}

func newRefContext(t *testing.T, m *Model) *refContext {
	t.Helper()
	cp := yz.ContextDefaultParams()
	cp.NCtx, cp.NBatch, cp.NUbatch, cp.NSeqMax = 512, 512, 512, 1
	cp.NThreads, cp.NThreadsBatch = 1, 1
	cp.KVUnified = 0
	cp.NoPerf = 1
	lctx, err := yz.InitFromModel(m.model, cp)
	if err != nil {
		t.Fatal(err)
	}
	r := &refContext{t: t, lctx: lctx, batch: yz.BatchInit(512, 0, 1), nVocab: m.nVocab}
	t.Cleanup(func() {
		_ = yz.BatchFree(r.batch)
		_ = yz.Free(r.lctx)
	})
	return r
}

// eval decodes toks and returns a copy of the last one's logits.
func (r *refContext) eval(toks []yz.Token) []float64 {
	r.t.Helper()
	_ = r.batch.Clear()
	for i, tok := range toks {
		if err := r.batch.Add(tok, yz.Pos(r.pos), []yz.SeqId{0}, i == len(toks)-1); err != nil {
			r.t.Fatal(err)
		}
		r.pos++
	}
	if ret, err := yz.Decode(r.lctx, r.batch); err != nil || ret != 0 {
		r.t.Fatalf("decode: %d %v", ret, err)
	}
	l, err := yz.GetLogitsIth(r.lctx, int32(len(toks)-1), r.nVocab)
	if err != nil || len(l) != r.nVocab {
		r.t.Fatalf("logits: %v", err)
	}
	out := make([]float64, len(l))
	for i, v := range l {
		out[i] = float64(v)
	}
	return out
}

// refLogSoftmax is the log-softmax of logits, written plainly.
func refLogSoftmax(logits []float64) []float64 {
	hi := slices.Max(logits)
	var sum float64
	for _, l := range logits {
		sum += math.Exp(l - hi)
	}
	out := make([]float64, len(logits))
	for i, l := range logits {
		out[i] = l - hi - math.Log(sum)
	}
	return out
}

// TestLogprobsGreedyEqualLogSoftmax: in a greedy run, each token's logprob
// is the log-softmax over the whole vocabulary of the logits an independent
// evaluation gives (with the logit bias added, when there is one); the top
// alternatives are k, sorted, the reference's k most likely, and the
// chosen token is the first of them.
func TestLogprobsGreedyEqualLogSoftmax(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.SPM), Options{Slots: 1, Threads: 1, BatchThreads: 1})
	prompt := tokenize(t, m, prompts[1])
	const k = 5
	plain := generate(t, m, Request{Prompt: prompt, MaxTokens: 8})
	for _, tc := range []struct {
		name string
		bias map[int32]float32
	}{
		{"plain", nil},
		{"bias", map[int32]float32{plain.tokens[0]: -100, plain.tokens[1]: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := m.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 8, Logprobs: true, TopLogprobs: k,
				Sampling: Sampling{LogitBias: tc.bias}})
			if err != nil {
				t.Fatal(err)
			}
			var evs []Event
			for ev := range ch {
				if ev.Done {
					if ev.Logprobs != nil {
						t.Error("the final event carries logprobs")
					}
					continue
				}
				evs = append(evs, ev)
			}
			if len(evs) != 8 {
				t.Fatalf("%d token events, want 8", len(evs))
			}
			ref := newRefContext(t, m)
			toks := make([]yz.Token, len(prompt))
			for i, id := range prompt {
				toks[i] = yz.Token(id)
			}
			logits := ref.eval(toks)
			for i, ev := range evs {
				for id, b := range tc.bias {
					logits[id] += float64(b)
				}
				want := refLogSoftmax(logits)
				lp := ev.Logprobs
				if lp == nil {
					t.Fatalf("token %d has no logprobs", i)
				}
				if lp.ID != ev.Token || string(lp.Bytes) != m.piece(yz.Token(ev.Token), true) {
					t.Errorf("token %d: logprobs of %d %q, event token %d", i, lp.ID, lp.Bytes, ev.Token)
				}
				if d := math.Abs(float64(lp.Logprob) - want[ev.Token]); d > 1e-4 {
					t.Errorf("token %d (%d): logprob %g, log-softmax %g", i, ev.Token, lp.Logprob, want[ev.Token])
				}
				order := make([]int32, len(want))
				for id := range order {
					order[id] = int32(id)
				}
				slices.SortStableFunc(order, func(a, b int32) int {
					switch {
					case want[a] > want[b]:
						return -1
					case want[a] < want[b]:
						return 1
					}
					return 0
				})
				if len(lp.Top) != k {
					t.Fatalf("token %d: %d alternatives, want %d", i, len(lp.Top), k)
				}
				if lp.Top[0].ID != ev.Token {
					t.Errorf("token %d: greedy chose %d, the most likely alternative is %d", i, ev.Token, lp.Top[0].ID)
				}
				for j, alt := range lp.Top {
					if j > 0 && alt.Logprob > lp.Top[j-1].Logprob {
						t.Errorf("token %d: alternatives not sorted: %+v", i, lp.Top)
					}
					if alt.ID != order[j] || math.Abs(float64(alt.Logprob)-want[alt.ID]) > 1e-4 {
						t.Errorf("token %d: alternative %d is %d (%g), reference %d (%g)", i, j, alt.ID, alt.Logprob, order[j], want[order[j]])
					}
				}
				if tc.bias != nil && slices.ContainsFunc(lp.Top, func(a backends.TokenLogprob) bool { return a.ID == plain.tokens[0] }) {
					t.Errorf("token %d: the banned token %d is among the alternatives", i, plain.tokens[0])
				}
				logits = ref.eval([]yz.Token{yz.Token(ev.Token)})
			}
		})
	}
}

// TestLogprobsKeepSampling: asking for logprobs does not change what a
// seeded request draws (the split stages draw as the plain path does),
// free and under a JSON schema's grammar (both draw first and constrain on
// rejection); under the grammar every token reported is one it allowed.
func TestLogprobsKeepSampling(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.BPE), Options{Slots: 1})
	prompt := tokenize(t, m, prompts[0])
	seed := int64(11)
	samp := Sampling{Temperature: 0.9, TopK: 40, TopP: 0.9, MinP: 0.02, Seed: &seed, RepeatPenalty: 1.1}
	a := generate(t, m, Request{Prompt: prompt, MaxTokens: 24, Sampling: samp})
	b := generate(t, m, Request{Prompt: prompt, MaxTokens: 24, Sampling: samp, Logprobs: true, TopLogprobs: 3})
	if !slices.Equal(a.tokens, b.tokens) {
		t.Errorf("seeded tokens without logprobs\n%v\nwith\n%v", a.tokens, b.tokens)
	}
	const schema = `{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false}`
	g, err := grammar.FromSchema(json.RawMessage(schema), grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	format := backends.ResponseFormat{Type: backends.FormatJSONSchema, Schema: json.RawMessage(schema), Grammar: g}
	for _, samp := range []Sampling{
		{Temperature: 1, Seed: &seed, LogitBias: closingBias(m)},
		{Temperature: 0.9, TopK: 40, MinP: 0.02, Seed: &seed, LogitBias: closingBias(m)},
	} {
		a := generate(t, m, Request{Prompt: prompt, MaxTokens: 200, Sampling: samp, ResponseFormat: format})
		ch, err := m.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 200, Sampling: samp, ResponseFormat: format, Logprobs: true})
		if err != nil {
			t.Fatal(err)
		}
		var toks []int32
		for ev := range ch {
			if ev.Done {
				continue
			}
			toks = append(toks, ev.Token)
			if ev.Logprobs == nil || ev.Logprobs.Logprob <= logprobFloor {
				t.Fatalf("token %d under the grammar: logprobs %+v", ev.Token, ev.Logprobs)
			}
		}
		if !slices.Equal(a.tokens, toks) {
			t.Errorf("top-k %d: seeded tokens under a grammar without logprobs\n%v\nwith\n%v", samp.TopK, a.tokens, toks)
		}
		if !json.Valid([]byte(a.text)) {
			t.Errorf("top-k %d: output %q is not JSON", samp.TopK, a.text)
		}
	}
}

// TestTopLogprobsRange: top_logprobs above 20 is refused, naming it.
func TestTopLogprobsRange(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.SPM), Options{Slots: 1})
	_, err := m.Generate(context.Background(), Request{Prompt: tokenize(t, m, prompts[0]), Logprobs: true, TopLogprobs: 21})
	if err == nil || err.Error() != "top_logprobs 21 is outside [0, 20]" {
		t.Fatalf("top_logprobs 21: %v", err)
	}
}

// TestTopTokens: the k largest finite logits, largest first.
func TestTopTokens(t *testing.T) {
	inf := float32(math.Inf(-1))
	logits := []float32{0.5, inf, 2, -1, 2, 7, inf}
	if got := topTokens(logits, 3); !slices.Equal(got, []int32{5, 2, 4}) {
		t.Errorf("top 3 = %v", got)
	}
	if got := topTokens(logits, 10); !slices.Equal(got, []int32{5, 2, 4, 0, 3}) {
		t.Errorf("top 10 = %v, want the five finite ones", got)
	}
	if got := topTokens(logits, 0); got != nil {
		t.Errorf("top 0 = %v", got)
	}
}

// BenchmarkLogprobs measures generation without logprobs and with
// top_logprobs 20 on the same model and prompt (tokens per op: 32).
func BenchmarkLogprobs(b *testing.B) {
	m := openModel(b, ggufgen.Tiny(ggufgen.SPM), Options{Slots: 1})
	prompt := tokenize(b, m, prompts[1])
	for _, c := range []struct {
		name string
		req  Request
	}{
		{"off", Request{Prompt: prompt, MaxTokens: 32}},
		{"top20", Request{Prompt: prompt, MaxTokens: 32, Logprobs: true, TopLogprobs: 20}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				generate(b, m, c.req)
			}
		})
	}
}
