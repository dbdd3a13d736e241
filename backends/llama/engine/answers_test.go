package engine

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/internal/ggufgen"
)

// stepKV is a kvModel that also records, for each KV position, how many
// tokens the step that wrote it carried (1: the one-token kernels, whose
// KV a prompt evaluation would not give), and can hold a step that carries
// no logits (an answer's evaluation) until the test lets it go.
type stepKV struct {
	*kvModel
	smu   sync.Mutex
	steps map[int][]int
	// holdAt, when > 0, holds the holdAt-th logit-free step: held gets a
	// value as it starts, and it waits for release to be closed.
	holdAt, quiet int
	held          chan struct{}
	release       chan struct{}
}

func newStepKV(next func([]yz.Token) yz.Token) *stepKV {
	return &stepKV{kvModel: newKVModel(next), steps: map[int][]int{}}
}

func (d *stepKV) decode(batch []batchToken) error {
	d.smu.Lock()
	logits := false
	for _, t := range batch {
		st := d.steps[t.seq]
		d.steps[t.seq] = append(st[:min(t.pos, len(st))], len(batch))
		logits = logits || t.logits
	}
	hold := false
	if !logits {
		d.quiet++
		hold = d.quiet == d.holdAt
	}
	d.smu.Unlock()
	err := d.kvModel.decode(batch)
	if hold {
		d.held <- struct{}{}
		<-d.release
	}
	return err
}

func (d *stepKV) seqRemove(seq int, from int) bool {
	d.smu.Lock()
	st := d.steps[seq]
	d.steps[seq] = st[:min(max(from, 0), len(st))]
	d.smu.Unlock()
	return d.kvModel.seqRemove(seq, from)
}

// oneTokenSteps are the positions of seq's first n KV tokens that a
// one-token step wrote.
func (d *stepKV) oneTokenSteps(seq, n int) []int {
	d.smu.Lock()
	defer d.smu.Unlock()
	var out []int
	for p, k := range d.steps[seq][:min(n, len(d.steps[seq]))] {
		if k < 2 {
			out = append(out, p)
		}
	}
	return out
}

func runOn(t *testing.T, s *scheduler, prompt []yz.Token, budget int) result {
	t.Helper()
	r := &request{ctx: context.Background(), prompt: prompt, budget: budget, stream: newStream()}
	if err := s.submit(r); err != nil {
		t.Fatal(err)
	}
	go r.stream.pump()
	return drain(t, r.stream.out)
}

// waitReevaluated waits until stats says at least n answer tokens were
// evaluated again, and fails after a minute (a scheduler that never does).
func waitReevaluated(t *testing.T, stats func() Stats, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for stats().ReevaluatedTokens < uint64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d answer tokens evaluated again after a minute, want %d", stats().ReevaluatedTokens, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An idle slot's answer is evaluated again in steps of two or more tokens,
// so the next turn, whose prompt repeats it, reuses all of it: every KV
// position it reuses was written by such a step, and its output is a fresh
// scheduler's. Off, the turn reuses only the last prompt.
func TestReuseAnswersScheduler(t *testing.T) {
	prompt := rewritePromptTokens()
	const budget = 2*answerStep + 2 // an answer of 2*answerStep+1 tokens in the KV: no step of one is left
	for _, on := range []bool{true, false} {
		dec := newStepKV(mixer)
		s := newSchedulerWith(dec, 1, 64, 1<<12, 0, Hooks{})
		s.reuseAnswers = on
		go s.loop()
		first := runOn(t, s, prompt, budget)
		if len(first.tokens) != budget {
			t.Fatalf("first turn: %d tokens, want %d", len(first.tokens), budget)
		}
		kv := len(prompt) + budget - 1 // the last token is sampled, never fed
		if on {
			waitReevaluated(t, s.stats, budget-1)
			if bad := dec.oneTokenSteps(0, kv); len(bad) > 0 {
				t.Fatalf("after the answer's evaluation, positions %v hold one-token KV", bad)
			}
		}
		next := slices.Concat(prompt, toTokens(first.tokens), []yz.Token{11, 12, 13})
		got := runOn(t, s, next, 40)
		s.stop()
		dec.check(t)
		want, _ := runKV(t, mixer, 0, next, 40)
		if !slices.Equal(got.tokens, want) {
			t.Fatalf("reuse %v: next turn gave\n%v\nwant a fresh scheduler's\n%v", on, got.tokens, want)
		}
		wantCached := len(prompt)
		if on {
			wantCached = kv
		}
		if c := got.final.Usage.CachedTokens; c != wantCached {
			t.Errorf("reuse %v: the next turn reused %d tokens, want %d", on, c, wantCached)
		}
		if bad := dec.oneTokenSteps(0, got.final.Usage.CachedTokens); on && len(bad) > 0 {
			t.Errorf("the next turn reused one-token KV at positions %v", bad)
		}
		if st := s.stats(); !on && st.ReevaluatedTokens != 0 {
			t.Errorf("off, %d answer tokens were evaluated again", st.ReevaluatedTokens)
		}
	}
}

// A request that arrives while an answer is being evaluated again waits
// for that one step only, and reuses what was evaluated by then; one that
// takes the slot for another prompt leaves nothing of the old answer
// behind. Outputs are a fresh scheduler's throughout.
func TestReuseAnswersInterrupted(t *testing.T) {
	prompt := rewritePromptTokens()
	const budget = 150
	for _, c := range []struct {
		name string
		same bool
	}{{"same conversation", true}, {"other prompt", false}} {
		t.Run(c.name, func(t *testing.T) {
			dec := newStepKV(mixer)
			dec.holdAt, dec.held, dec.release = 2, make(chan struct{}), make(chan struct{})
			s := newSchedulerWith(dec, 1, 64, 1<<12, 0, Hooks{})
			s.reuseAnswers = true
			go s.loop()
			defer s.stop()
			first := runOn(t, s, prompt, budget)
			select {
			case <-dec.held: // the answer's second step
			case <-time.After(time.Minute):
				t.Fatal("the answer's second step did not come within a minute")
			}
			next := slices.Concat(prompt, toTokens(first.tokens), []yz.Token{11, 12, 13})
			if !c.same {
				next = slices.Concat([]yz.Token{20, 21, 22}, prompt[3:])
			}
			r := &request{ctx: context.Background(), prompt: next, budget: 40, stream: newStream()}
			if err := s.submit(r); err != nil {
				t.Fatal(err)
			}
			go r.stream.pump()
			close(dec.release)
			got := drain(t, r.stream.out)
			want, _ := runKV(t, mixer, 0, next, 40)
			if !slices.Equal(got.tokens, want) {
				t.Fatalf("turn during the answer's evaluation gave\n%v\nwant\n%v", got.tokens, want)
			}
			wantCached := 0
			if c.same {
				wantCached = len(prompt) + 2*answerStep // the steps done when it was admitted
			}
			if n := got.final.Usage.CachedTokens; n != wantCached {
				t.Errorf("reused %d tokens, want %d", n, wantCached)
			}
			// The slot's own answer is evaluated next, not the old one's rest.
			waitReevaluated(t, s.stats, 2*answerStep+39)
			again := slices.Concat(next, toTokens(got.tokens), []yz.Token{14, 15})
			third := runOn(t, s, again, 20)
			dec.check(t)
			if want, _ := runKV(t, mixer, 0, again, 20); !slices.Equal(third.tokens, want) {
				t.Fatalf("third turn gave\n%v\nwant\n%v", third.tokens, want)
			}
			if n, want := third.final.Usage.CachedTokens, len(next)+39; n != want {
				t.Errorf("third turn reused %d tokens, want %d", n, want)
			}
			if bad := dec.oneTokenSteps(0, third.final.Usage.CachedTokens); len(bad) > 0 {
				t.Errorf("reused one-token KV at positions %v", bad)
			}
		})
	}
}

// On real models the next turn after an answer evaluated again gives the
// output of a model without it, byte for byte, reusing the answer too: the
// trained model, a random-weight F16 one, and the F16 benchmark model, on
// which reusing the answer's one-token KV as it is changes the output.
func TestReuseAnswersEqualsPlain(t *testing.T) {
	models := map[string]string{
		"stories260K": trainedModel(t),
		"random F16":  genModel(t, ggufgen.Options{Type: ggufgen.F16, Context: 1024}),
		"F16 bench":   genModel(t, ggufgen.Bench(ggufgen.SPM)),
	}
	for name, path := range models {
		t.Run(name, func(t *testing.T) {
			initLib(t)
			run := func(reuse bool) (first, next result, prompt []int32, stats Stats) {
				m, err := open(path, Options{Slots: 1, ContextSize: 1024, ReuseAnswers: reuse}, Hooks{})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				prompt = longPrompt(t, m, 120)
				first = generate(t, m, Request{Prompt: prompt, MaxTokens: 150})
				kv := len(first.tokens)
				if first.final.Finish == FinishLength {
					kv--
				}
				if reuse {
					waitReevaluated(t, m.Stats, kv)
				}
				more, err := m.Tokenize(" and then the dog said", false, false)
				if err != nil {
					t.Fatal(err)
				}
				next = generate(t, m, Request{Prompt: slices.Concat(prompt, first.tokens, more), MaxTokens: 60})
				return first, next, prompt, m.Stats()
			}
			pf, plain, prompt, _ := run(false)
			rf, reused, _, st := run(true)
			if len(pf.tokens) < 40 {
				t.Fatalf("the first answer has %d tokens; the test needs a longer one", len(pf.tokens))
			}
			if rf.text != pf.text || reused.text != plain.text {
				t.Fatalf("with the answer evaluated again:\n%q\n%q\nwithout:\n%q\n%q", rf.text, reused.text, pf.text, plain.text)
			}
			kv := len(pf.tokens)
			if pf.final.Finish == FinishLength {
				kv--
			}
			if c := plain.final.Usage.CachedTokens; c != len(prompt) {
				t.Errorf("without: the next turn reused %d tokens, want the prompt's %d", c, len(prompt))
			}
			if c := reused.final.Usage.CachedTokens; c != len(prompt)+kv {
				t.Errorf("with: the next turn reused %d tokens, want %d (prompt and answer)", c, len(prompt)+kv)
			}
			if st.ReevaluatedTokens < uint64(kv) {
				t.Errorf("stats count %d tokens evaluated again, want at least %d", st.ReevaluatedTokens, kv)
			}
		})
	}
}

// An answer waits answerDelay after its request: a next turn sent before
// then evaluates the answer's tail with its own prompt, and nothing of the
// answer is evaluated on its own.
func TestReuseAnswersWaitsDelay(t *testing.T) {
	prompt := rewritePromptTokens()
	dec := newStepKV(mixer)
	s := newSchedulerWith(dec, 1, 64, 1<<12, 0, Hooks{})
	s.reuseAnswers, s.answerDelay = true, time.Hour
	go s.loop()
	defer s.stop()
	first := runOn(t, s, prompt, 40)
	next := slices.Concat(prompt, toTokens(first.tokens), []yz.Token{11, 12, 13})
	got := runOn(t, s, next, 10)
	dec.check(t)
	if want, _ := runKV(t, mixer, 0, next, 10); !slices.Equal(got.tokens, want) {
		t.Fatalf("next turn gave\n%v\nwant\n%v", got.tokens, want)
	}
	if c := got.final.Usage.CachedTokens; c != len(prompt) {
		t.Errorf("the next turn reused %d tokens, want the last prompt's %d", c, len(prompt))
	}
	if n := s.stats().ReevaluatedTokens; n != 0 {
		t.Errorf("%d answer tokens evaluated before the delay", n)
	}
}
