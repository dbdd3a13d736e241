package engine

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// kvModel is a fake decoder with a model: it keeps each sequence's KV
// (tokens by position) as the batches and removals leave it, and samples
// the next token as a function of the KV the logits' position sees, so a
// draft the scheduler keeps wrongly, or KV it forgets to drop, changes the
// output. Batches must put each sequence's tokens at its next positions.
type kvModel struct {
	fakeDecoder
	next func(hist []yz.Token) yz.Token

	mu   sync.Mutex
	kv   map[int][]yz.Token
	seen [][]yz.Token // by batch index of the last decode: the history of a position with logits
	err  error
}

func newKVModel(next func([]yz.Token) yz.Token) *kvModel {
	return &kvModel{fakeDecoder: fakeDecoder{seqs: map[int]bool{}}, next: next, kv: map[int][]yz.Token{}}
}

func (d *kvModel) decode(batch []batchToken) error {
	d.mu.Lock()
	d.seen = make([][]yz.Token, len(batch))
	for i, t := range batch {
		kv := d.kv[t.seq]
		if t.pos != len(kv) && d.err == nil {
			d.err = fmt.Errorf("seq %d: token at position %d with %d in its KV", t.seq, t.pos, len(kv))
		}
		d.kv[t.seq] = append(kv[:min(t.pos, len(kv))], t.tok)
		if t.logits {
			d.seen[i] = slices.Clone(d.kv[t.seq])
		}
	}
	d.mu.Unlock()
	return d.fakeDecoder.decode(batch)
}

func (d *kvModel) sample(_ int, i int32) yz.Token {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.next(d.seen[i])
}

func (d *kvModel) seqRemove(seq int, from int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if from < 0 {
		from = 0
	}
	d.kv[seq] = d.kv[seq][:min(from, len(d.kv[seq]))]
	return true
}

func (d *kvModel) check(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		t.Error(d.err)
	}
}

// copier continues the latest earlier occurrence of its last token (a
// rewrite), else counts up; never the end-of-generation token 2.
func copier(hist []yz.Token) yz.Token {
	last := hist[len(hist)-1]
	for p := len(hist) - 2; p >= 0; p-- {
		if hist[p] == last {
			return hist[p+1]
		}
	}
	return 10 + (last+1)%50
}

// mixer mixes its last two tokens: free text, which lookup seldom drafts
// right.
func mixer(hist []yz.Token) yz.Token {
	a, b := hist[len(hist)-1], yz.Token(0)
	if len(hist) > 1 {
		b = hist[len(hist)-2]
	}
	return 10 + (a*31+b*17+yz.Token(len(hist)))%40
}

// runKV runs one request of prompt on a fresh scheduler over model next
// with draft size lookup, and returns its tokens and the scheduler's stats.
func runKV(t *testing.T, next func([]yz.Token) yz.Token, lookup int, prompt []yz.Token, budget int) ([]int32, Stats) {
	t.Helper()
	dec := newKVModel(next)
	s := newSchedulerWith(dec, 2, 64, 1<<12, 0, Hooks{})
	s.lookup = lookup
	go s.loop()
	defer s.stop()
	r := &request{ctx: context.Background(), prompt: prompt, budget: budget, stream: newStream()}
	if err := s.submit(r); err != nil {
		t.Fatal(err)
	}
	go r.stream.pump()
	var toks []int32
	for ev := range r.stream.out {
		if !ev.Done {
			toks = append(toks, ev.Token)
		}
	}
	dec.check(t)
	return toks, s.stats()
}

func rewritePromptTokens() []yz.Token {
	var p []yz.Token
	for i := 0; i < 40; i++ {
		p = append(p, yz.Token(10+(i*7)%45))
	}
	return append(p, p[0], p[1])
}

// The scheduler's drafts change nothing of the output, on a model that
// rewrites its prompt (where nearly every draft is kept and the steps are
// few) and on one that does not (where the lookup stops drafting), and the
// counters add up.
func TestLookupSchedulerExact(t *testing.T) {
	prompt := rewritePromptTokens()
	for _, c := range []struct {
		name string
		next func([]yz.Token) yz.Token
	}{{"rewrite", copier}, {"free", mixer}} {
		t.Run(c.name, func(t *testing.T) {
			want, plain := runKV(t, c.next, 0, prompt, 120)
			got, spec := runKV(t, c.next, 8, prompt, 120)
			if !slices.Equal(got, want) {
				t.Fatalf("with lookup\n%v\nwithout\n%v", got, want)
			}
			if len(want) != 120 {
				t.Fatalf("%d tokens, want the budget of 120", len(want))
			}
			if plain.Drafts != 0 || spec.AcceptedTokens > spec.DraftTokens {
				t.Errorf("off: %d drafts; on: %d tokens drafted, %d kept", plain.Drafts, spec.DraftTokens, spec.AcceptedTokens)
			}
			switch c.name {
			case "rewrite":
				if spec.DecodeCalls*3 > plain.DecodeCalls || spec.AcceptedTokens < 100 {
					t.Errorf("rewrite: %d decode calls with lookup, %d without; %d of %d drafted kept",
						spec.DecodeCalls, plain.DecodeCalls, spec.AcceptedTokens, spec.DraftTokens)
				}
			case "free":
				if spec.DraftTokens > lookupWindow+8 {
					t.Errorf("free text: %d tokens drafted (%d kept); the lookup should stop after a window of %d",
						spec.DraftTokens, spec.AcceptedTokens, lookupWindow)
				}
			}
			t.Logf("decode calls %d -> %d; %d drafts, %d drafted, %d kept", plain.DecodeCalls, spec.DecodeCalls, spec.Drafts, spec.DraftTokens, spec.AcceptedTokens)
		})
	}
}

// seededCopier is copier with a seeded random draw: each call takes one
// number from its own generator and, one time in four, returns a token
// drawn from it instead of the copy. *calls counts the draws.
func seededCopier(seed int64, calls *int) func([]yz.Token) yz.Token {
	rng := rand.New(rand.NewSource(seed))
	return func(hist []yz.Token) yz.Token {
		*calls++
		u := rng.Float64()
		if u < 0.25 {
			return 10 + yz.Token(u*4*50)
		}
		return copier(hist)
	}
}

// Seeded sampling gives the same tokens with drafts and without, on a
// model whose numbers do not depend on the step: the scheduler takes one
// draw per emitted token, in order, whether the token was drafted and kept,
// drawn where a draft was rejected, or decoded alone.
func TestLookupSchedulerSeeded(t *testing.T) {
	prompt := rewritePromptTokens()
	var kept, rejected uint64
	for seed := int64(1); seed <= 20; seed++ {
		var plainCalls, specCalls int
		want, _ := runKV(t, seededCopier(seed, &plainCalls), 0, prompt, 100)
		got, st := runKV(t, seededCopier(seed, &specCalls), 8, prompt, 100)
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: with lookup\n%v\nwithout\n%v", seed, got, want)
		}
		if plainCalls != len(want) || specCalls != len(got) {
			t.Errorf("seed %d: %d draws without lookup, %d with, for %d tokens", seed, plainCalls, specCalls, len(got))
		}
		kept += st.AcceptedTokens
		rejected += st.DraftTokens - st.AcceptedTokens
	}
	if kept == 0 || rejected == 0 {
		t.Errorf("%d drafted tokens kept and %d rejected: both cases should occur", kept, rejected)
	}
	t.Logf("%d drafted tokens kept, %d rejected", kept, rejected)
}

// A draft is never longer than the budget left: the request ends at its
// budget with the KV of the tokens it emitted, and stop at a drafted
// position drops the rest of the draft.
func TestLookupRespectsBudget(t *testing.T) {
	prompt := rewritePromptTokens()
	for _, budget := range []int{1, 2, 3, 9, 10, 17} {
		want, _ := runKV(t, copier, 0, prompt, budget)
		got, st := runKV(t, copier, 8, prompt, budget)
		if !slices.Equal(got, want) || len(got) != budget {
			t.Errorf("budget %d: with lookup %v, without %v", budget, got, want)
		}
		if int(st.DecodedTokens) > len(prompt)+budget+8 {
			t.Errorf("budget %d: %d tokens decoded for a prompt of %d", budget, st.DecodedTokens, len(prompt))
		}
	}
}
