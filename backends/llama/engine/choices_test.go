package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/grammar"
	"github.com/modeld/modeld/internal/ggufgen"
)

func (d *fakeDecoder) seqCopy(int, int) error { return nil }

// copyDecoder is a fakeDecoder that records its sequence copies.
type copyDecoder struct {
	*fakeDecoder
	mu     sync.Mutex
	copies [][2]int
	fail   func(dst int) error // nil: every copy succeeds
}

func (d *copyDecoder) seqCopy(src, dst int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.copies = append(d.copies, [2]int{src, dst})
	if d.fail != nil {
		return d.fail(dst)
	}
	return nil
}

// TestSchedulerChoicesSharePrompt: a request of three choices takes three
// slots at once; only the first decodes the prompt, the other two get a
// copy of its KV, and each choice runs its own budget to the end.
func TestSchedulerChoicesSharePrompt(t *testing.T) {
	dec := &copyDecoder{fakeDecoder: newFakeDecoder()}
	s := newSchedulerWith(dec, 3, 8, 1<<20, 0, Hooks{})
	go s.loop()
	t.Cleanup(s.stop)
	prompt := []yz.Token{10, 11, 12, 13, 14}
	r := &request{ctx: context.Background(), prompt: prompt, budget: 3, stream: newStream()}
	r.withChoices(3)
	if err := s.submit(r); err != nil {
		t.Fatal(err)
	}
	var ends []Event
	for _, c := range r.group() {
		go c.stream.pump()
		ends = append(ends, last(t, c.stream.out))
	}
	for i, ev := range ends {
		if ev.Finish != FinishLength || ev.Usage.CompletionTokens != 3 || ev.Usage.PromptTokens != len(prompt) {
			t.Errorf("choice %d ended with %+v, want length after 3 tokens of a %d-token prompt", i, ev, len(prompt))
		}
	}
	total := 0
	for seq := 0; seq < 3; seq++ {
		total += dec.promptTokens(seq)
	}
	if total != len(prompt) {
		t.Errorf("%d prompt tokens decoded over the three sequences, want %d (the prompt once)", total, len(prompt))
	}
	dec.mu.Lock()
	copies := slices.Clone(dec.copies)
	dec.mu.Unlock()
	if len(copies) != 2 || copies[0][0] != copies[1][0] || copies[0][1] == copies[1][1] || copies[0][0] == copies[0][1] {
		t.Errorf("sequence copies %v, want two from the prompt's sequence to the two others", copies)
	}
}

// TestSchedulerChoicesCopyFails: when the copy of the prompt's KV to one
// choice's sequence fails, that choice ends with an error (ErrDecode,
// wrapping the copy's error) after drawing no token from a state that is
// not the prompt's; the leader and the other follower run to their budget.
func TestSchedulerChoicesCopyFails(t *testing.T) {
	errCopy := errors.New("seq_cp refused")
	dec := &copyDecoder{fakeDecoder: newFakeDecoder()}
	failed := -1
	dec.fail = func(dst int) error {
		if failed < 0 {
			failed = dst
			return errCopy
		}
		return nil
	}
	s := newSchedulerWith(dec, 3, 8, 1<<20, 0, Hooks{})
	go s.loop()
	t.Cleanup(s.stop)
	prompt := []yz.Token{10, 11, 12, 13}
	r := &request{ctx: context.Background(), prompt: prompt, budget: 3, stream: newStream()}
	r.withChoices(3)
	if err := s.submit(r); err != nil {
		t.Fatal(err)
	}
	var errs, ok int
	for i, c := range r.group() {
		go c.stream.pump()
		var evs []Event
		for ev := range c.stream.out {
			evs = append(evs, ev)
		}
		end := evs[len(evs)-1]
		switch {
		case end.Finish == FinishError:
			errs++
			if !errors.Is(end.Err, ErrDecode) || !errors.Is(end.Err, errCopy) || len(evs) != 1 || end.Usage.CompletionTokens != 0 {
				t.Errorf("choice %d: %d events, final %+v; want only an error wrapping ErrDecode and the copy's error, no token", i, len(evs), end)
			}
		case end.Finish == FinishLength && end.Usage.CompletionTokens == 3:
			ok++
		default:
			t.Errorf("choice %d ended with %+v", i, end)
		}
	}
	if errs != 1 || ok != 2 {
		t.Errorf("%d choices failed and %d finished, want 1 and 2", errs, ok)
	}
	if st := s.stats(); st.Active != 0 {
		t.Errorf("%d slots still active after every choice ended", st.Active)
	}
}

// TestSchedulerChoicesWaitForSlots: a request of two choices waits while
// only one slot is idle, and runs once both are.
func TestSchedulerChoicesWaitForSlots(t *testing.T) {
	dec := newFakeDecoder()
	dec.entered, dec.gate = make(chan int, 64), make(chan struct{})
	s := startFake(t, dec, 2, 8, 0)
	first, err := submitFake(t, s, context.Background(), 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	<-dec.entered // the first request holds one of the two slots
	r := &request{ctx: context.Background(), prompt: []yz.Token{20, 21, 22}, budget: 2, stream: newStream()}
	r.withChoices(2)
	if err := s.submit(r); err != nil {
		t.Fatal(err)
	}
	if st := s.stats(); st.Active != 1 || st.Waiting != 1 {
		t.Fatalf("stats %+v, want one active and the two-choice request waiting", st)
	}
	close(dec.gate)
	last(t, first)
	for i, c := range r.group() {
		go c.stream.pump()
		if ev := last(t, c.stream.out); ev.Finish != FinishLength {
			t.Errorf("choice %d ended with %+v", i, ev)
		}
	}
}

// TestChoicesOverSlots: n above the slots is a 400 on n naming both.
func TestChoicesOverSlots(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.SPM), Options{Slots: 2})
	_, err := m.Generate(context.Background(), Request{Prompt: tokenize(t, m, prompts[0]), MaxTokens: 4, N: 3})
	var br *backends.BadRequestError
	if !errors.As(err, &br) || br.Param != "n" || br.Error() != "n 3 is more than the 2 slots this model runs (each choice is a sequence of its own)" {
		t.Fatalf("n 3 on 2 slots: %v", err)
	}
}

// drainChoices reads an n-choice stream to its end: each choice's tokens,
// text and final event, by index.
func drainChoices(t *testing.T, ch <-chan Event, n int) []result {
	t.Helper()
	out := make([]result, n)
	for ev := range ch {
		if ev.Index < 0 || ev.Index >= n {
			t.Fatalf("event of choice %d in a %d-choice stream", ev.Index, n)
		}
		r := &out[ev.Index]
		if r.final.Done {
			t.Fatalf("choice %d has an event after its final one", ev.Index)
		}
		r.events++
		r.text += ev.Text
		if ev.Done {
			r.final = ev
			continue
		}
		r.tokens = append(r.tokens, ev.Token)
	}
	for i, r := range out {
		if !r.final.Done {
			t.Fatalf("choice %d has no final event", i)
		}
	}
	return out
}

// TestChoicesSeeded: n=3 with a seed gives three choices, reproducibly, not
// all the same; the prompt is evaluated once (the decoded tokens are the
// prompt plus each choice's fed-back tokens).
func TestChoicesSeeded(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.SPM), Options{Slots: 3})
	prompt := tokenize(t, m, prompts[1])
	seed := int64(7)
	req := Request{Prompt: prompt, MaxTokens: 12, N: 3, Sampling: Sampling{Temperature: 1, Seed: &seed}}
	before := m.Stats().DecodedTokens
	ch, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	a := drainChoices(t, ch, 3)
	fed := 0
	for i, c := range a {
		u := c.final.Usage
		if u.PromptTokens != len(prompt) || u.CompletionTokens < 1 || c.final.Finish == FinishError {
			t.Errorf("choice %d ended with %+v", i, c.final)
		}
		fed += u.CompletionTokens - 1 // the last token is never fed back
	}
	if got, want := m.Stats().DecodedTokens-before, uint64(len(prompt)+fed); got != want {
		t.Errorf("%d tokens decoded, want %d: the %d-token prompt once and %d fed-back tokens", got, want, len(prompt), fed)
	}
	if slices.Equal(a[0].tokens, a[1].tokens) && slices.Equal(a[1].tokens, a[2].tokens) {
		t.Errorf("three seeded choices are all %v", a[0].tokens)
	}
	ch, err = m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	b := drainChoices(t, ch, 3)
	for i := range a {
		if !slices.Equal(a[i].tokens, b[i].tokens) {
			t.Errorf("choice %d differs between two runs with seed %d:\n%v\n%v", i, seed, a[i].tokens, b[i].tokens)
		}
	}
}

// TestChoicesGreedyEqual: greedy n=2 gives two identical texts: the copied
// KV is the prompt's.
func TestChoicesGreedyEqual(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.BPE), Options{Slots: 2})
	ch, err := m.Generate(context.Background(), Request{Prompt: tokenize(t, m, prompts[2]), MaxTokens: 16, N: 2})
	if err != nil {
		t.Fatal(err)
	}
	two := drainChoices(t, ch, 2)
	if two[0].text != two[1].text || !slices.Equal(two[0].tokens, two[1].tokens) || len(two[0].tokens) == 0 {
		t.Errorf("greedy choices differ:\n%v %q\n%v %q", two[0].tokens, two[0].text, two[1].tokens, two[1].text)
	}
}

// TestChoicesStructured: under a response_format grammar each of three
// seeded choices is constrained on its own: every one parses and validates,
// and each reports logprobs.
func TestChoicesStructured(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.BPE), Options{Slots: 3, ContextSize: 1024})
	sc := structuredSchemas[0]
	g, err := grammar.FromSchema(json.RawMessage(sc.schema), grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := schemaValidator(t, sc.name, sc.schema)
	seed := int64(5)
	ch, err := m.Generate(context.Background(), Request{Prompt: tokenize(t, m, "Answer in JSON:"), MaxTokens: 900, N: 3,
		Logprobs: true, TopLogprobs: 2,
		Sampling:       Sampling{Temperature: 1, Seed: &seed, LogitBias: closingBias(m)},
		ResponseFormat: backends.ResponseFormat{Type: backends.FormatJSONSchema, Schema: json.RawMessage(sc.schema), Grammar: g}})
	if err != nil {
		t.Fatal(err)
	}
	var lps [3]int
	out := make([]result, 3)
	for ev := range ch {
		r := &out[ev.Index]
		r.text += ev.Text
		if ev.Done {
			r.final = ev
		} else if ev.Logprobs != nil && len(ev.Logprobs.Top) > 0 && ev.Logprobs.Logprob <= 0 {
			lps[ev.Index]++
			r.tokens = append(r.tokens, ev.Token)
		}
	}
	for i, r := range out {
		if r.final.Finish != FinishStop || lps[i] != r.final.Usage.CompletionTokens-1 {
			t.Fatalf("choice %d: finish %q, %d of %d tokens with logprobs: %q", i, r.final.Finish, lps[i], r.final.Usage.CompletionTokens, r.text)
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(r.text))
		if err != nil {
			t.Fatalf("choice %d is not JSON: %v\n%q", i, err, r.text)
		}
		if err := v.Validate(inst); err != nil {
			t.Fatalf("choice %d fails the schema: %v\n%q", i, err, r.text)
		}
	}
}

// TestSchedulerChoicesCancel: cancelling an n-choice request ends every
// choice, running or still waiting for slots, and frees their slots.
func TestSchedulerChoicesCancel(t *testing.T) {
	dec := &copyDecoder{fakeDecoder: newFakeDecoder()}
	dec.entered, dec.gate = make(chan int, 1024), make(chan struct{})
	s := newSchedulerWith(dec, 3, 8, 1<<20, 0, Hooks{})
	go s.loop()
	t.Cleanup(func() {
		select {
		case <-dec.gate:
		default:
			close(dec.gate)
		}
		s.stop()
	})
	ctx, cancel := context.WithCancel(context.Background())
	running := &request{ctx: ctx, prompt: []yz.Token{10, 11, 12}, budget: 1000, stream: newStream()}
	running.withChoices(3)
	if err := s.submit(running); err != nil {
		t.Fatal(err)
	}
	<-dec.entered // the three choices hold the three slots
	waiting := &request{ctx: ctx, prompt: []yz.Token{20, 21}, budget: 5, stream: newStream()}
	waiting.withChoices(2)
	if err := s.submit(waiting); err != nil {
		t.Fatal(err)
	}
	cancel()
	close(dec.gate)
	for _, r := range []*request{running, waiting} {
		for i, c := range r.group() {
			go c.stream.pump()
			if ev := last(t, c.stream.out); ev.Finish != FinishCancelled {
				t.Errorf("choice %d ended with %+v, want cancelled", i, ev)
			}
		}
	}
	if st := s.stats(); st.Active != 0 || st.Waiting != 0 {
		t.Errorf("stats after the cancel: %+v, want nothing active or waiting", st)
	}
}
