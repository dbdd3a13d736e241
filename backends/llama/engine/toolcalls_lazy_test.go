package engine

import (
	"fmt"
	"strings"
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/grammar"
	"github.com/modeld/modeld/backends/toolcall"
	"github.com/modeld/modeld/internal/testenv"
)

// forced is a forcedRun: the whole output (control tokens as text),
// whether it ended at end of generation, whether the trigger fired, and
// the samplers its stage chain held at the end.
type forced struct {
	out    string
	eog    bool
	fired  bool
	staged int
}

// forcedRun drives a decoder of its own over m: it evaluates prompt, then
// makes start the output's first tokens (each accepted by the sequence's
// chain and watched for the trigger, as if sampled), then samples up to
// max tokens under c and samp.
func forcedRun(t *testing.T, m *Model, prompt []int32, start []yz.Token, c constraint, samp Sampling, max int) forced {
	t.Helper()
	d, err := newLlamaDecoder(m, Options{Slots: 1, Threads: 1, BatchThreads: 2}, 512, 2048)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	d.startSeq(0, samp, c)
	var batch []batchToken
	for i, tok := range prompt {
		batch = append(batch, batchToken{tok: yz.Token(tok), pos: i, logits: i == len(prompt)-1})
	}
	if err := d.decode(batch); err != nil {
		t.Fatal(err)
	}
	var res forced
	pos, logit := len(prompt), int32(len(prompt)-1)
	step := func(tok yz.Token) {
		res.out += m.piece(tok, true)
		if err := d.decode([]batchToken{{tok: tok, pos: pos, logits: true}}); err != nil {
			t.Fatal(err)
		}
		pos, logit = pos+1, 0
	}
	for _, tok := range start {
		d.smpl[0].accept(tok)
		d.lazyAccept(0, tok)
		step(tok)
	}
	for range max {
		tok := d.sample(0, logit)
		if yz.VocabIsEOG(m.vocab, tok) {
			res.eog = true
			break
		}
		step(tok)
	}
	if ls := d.lazy.seq(0); ls != nil {
		res.fired, res.staged = ls.fired, yz.SamplerChainN(ls.stage)
	}
	return res
}

// textTokens is text as m's tokens, nothing added, control tokens as text.
func textTokens(t *testing.T, m *Model, text string) []yz.Token {
	t.Helper()
	ids, err := m.Tokenize(text, false, false)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]yz.Token, len(ids))
	for i, id := range ids {
		out[i] = yz.Token(id)
	}
	return out
}

// lazyConstraint is the auto constraint of tools for m's family.
func lazyConstraint(t *testing.T, m *Model, tools []Tool) constraint {
	t.Helper()
	req := Request{Tools: tools, ToolChoice: backends.ToolChoice{Mode: backends.ToolChoiceAuto, Grammar: callGrammarOf(t, tools)}}
	c, err := m.constraint(&req)
	if err != nil {
		t.Fatal(err)
	}
	if c.trig == nil {
		t.Fatalf("auto gave no lazy grammar for %s", toolcall.Detect(m.Info().ChatTemplate))
	}
	return c
}

// checkParsed asserts out parses as fam's output into at least one call,
// each of a tool of check with arguments its schema accepts, and content
// without the marker.
func checkParsed(t *testing.T, label string, fam toolcall.Family, out, marker string, check map[string]*jsonschema.Schema) []backends.ToolCall {
	t.Helper()
	content, calls, err := toolcall.Parse(fam, out, nil)
	if err != nil || len(calls) == 0 {
		t.Fatalf("%s: %d calls, %v: %q", label, len(calls), err, out)
	}
	if marker != "" && strings.Contains(content, marker) {
		t.Fatalf("%s: the marker in the content %q", label, content)
	}
	for _, c := range calls {
		v, ok := check[c.Name]
		if !ok {
			t.Fatalf("%s: call of %q: %q", label, c.Name, out)
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(c.Arguments))
		if err != nil {
			t.Fatalf("%s: arguments not JSON: %v: %q", label, err, c.Arguments)
		}
		if err := v.Validate(inst); err != nil {
			t.Fatalf("%s: arguments fail %s's schema: %v: %q", label, c.Name, err, c.Arguments)
		}
	}
	return calls
}

// TestLazyTriggerFires: the random-weight model with Qwen2.5's template
// under tool_choice auto, its output made to begin with text and the
// marker <tool_call> (as the vocabulary splits it, and with the marker
// starting inside a token), then sampled freely over several seeds: the
// trigger fires on the marker, the grammar joins the chain, and the
// output ends at end of generation with complete calls that parse and
// validate. The same forced start without the grammar does not give a
// valid call. A marker whose token carries text no call can follow does
// not fire: the output stays free text.
func TestLazyTriggerFires(t *testing.T) {
	m, prompt, _, check := qwenTools(t, grammarTools)
	c := lazyConstraint(t, m, grammarTools)
	bias := closingBias(m)
	starts := []string{"Let me check.\n<tool_call>", "Checking: <tool_call>", "<tool_call>"}
	for _, start := range starts {
		for _, seed := range []int64{-1, 1, 2, 3} {
			label := fmt.Sprintf("%q seed %d", start, seed)
			samp := Sampling{LogitBias: bias}
			if seed >= 0 {
				samp.Temperature, samp.Seed = 1, &seed
			}
			r := forcedRun(t, m, prompt, textTokens(t, m, start), c, samp, 1500)
			if !r.fired || r.staged != 1 {
				t.Fatalf("%s: fired %v, %d samplers staged: %q", label, r.fired, r.staged, r.out)
			}
			if !r.eog {
				t.Fatalf("%s: no end of generation in 1500 tokens: %q", label, r.out)
			}
			calls := checkParsed(t, label, toolcall.Hermes, r.out, "<tool_call>", check)
			t.Logf("%s: %d calls: %q", label, len(calls), r.out[len(start):])
		}
	}
	// The marker begins inside a token.
	var inside []yz.Token
	for id := 0; id < m.nVocab && inside == nil; id++ {
		if p := m.piece(yz.Token(id), true); len(p) > 1 && strings.HasSuffix(p, "<") && !strings.ContainsAny(p, "\n") {
			inside = append([]yz.Token{yz.Token(id)}, textTokens(t, m, "tool_call>")...)
		}
	}
	if inside == nil {
		t.Fatal("no token ends in <")
	}
	r := forcedRun(t, m, prompt, inside, c, Sampling{LogitBias: bias}, 600)
	if !r.fired || !r.eog {
		t.Fatalf("marker inside a token: fired %v, end %v: %q", r.fired, r.eog, r.out)
	}
	checkParsed(t, "marker inside a token", toolcall.Hermes, r.out, "<tool_call>", check)
	// Without the grammar the forced starts give no valid call.
	for _, start := range starts {
		r := forcedRun(t, m, prompt, textTokens(t, m, start), constraint{}, Sampling{LogitBias: bias}, 100)
		if _, calls, err := toolcall.Parse(toolcall.Hermes, r.out, nil); err == nil && len(calls) > 0 {
			t.Fatalf("without the grammar %q gave calls %+v", start, calls)
		}
	}
	// A marker whose last token goes on with what no call can: no trigger.
	var bad yz.Token = -1
	for id := 0; id < m.nVocab && bad < 0; id++ {
		if p := m.piece(yz.Token(id), true); len(p) > 1 && p[0] == '>' && p[1] != '\n' {
			bad = yz.Token(id)
		}
	}
	r = forcedRun(t, m, prompt, append(textTokens(t, m, "<tool_call"), bad), c, Sampling{LogitBias: bias}, 50)
	if r.fired || r.staged != 0 {
		t.Fatalf("%q fired: %q", m.piece(bad, true), r.out)
	}
	if _, calls, _ := toolcall.Parse(toolcall.Hermes, r.out, nil); len(calls) > 0 {
		t.Fatalf("calls after a marker that is no call's start: %+v: %q", calls, r.out)
	}
}

// TestLazyTriggerStart: the generic family's start pattern ({"tool_calls"
// as the output's first text, Phi 3.5's template over an SPM vocabulary)
// fires and the output is the generic object of valid calls; an output
// whose start is other text never fires.
func TestLazyTriggerStart(t *testing.T) {
	initLib(t)
	m, err := Open(testenv.LlamaChatModel(t, "phi-3", "microsoft-Phi-3.5-mini-instruct"), Options{ContextSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	check := map[string]*jsonschema.Schema{}
	for _, tl := range grammarTools {
		check[tl.Name] = schemaValidator(t, tl.Name, string(tl.Parameters))
	}
	c := lazyConstraint(t, m, grammarTools)
	prompt := tokenize(t, m, "Weather in Paris?")
	bias := closingBias(m)
	for _, seed := range []int64{-1, 1, 2} {
		samp := Sampling{LogitBias: bias}
		if seed >= 0 {
			samp.Temperature, samp.Seed = 1, &seed
		}
		label := fmt.Sprintf("generic seed %d", seed)
		r := forcedRun(t, m, prompt, textTokens(t, m, `{"tool_calls"`), c, samp, 600)
		if !r.fired || !r.eog {
			t.Fatalf("%s: fired %v, end %v: %q", label, r.fired, r.eog, r.out)
		}
		checkParsed(t, label, toolcall.Generic, r.out, "", check)
	}
	r := forcedRun(t, m, prompt, textTokens(t, m, `Sure, {"tool_calls"`), c, Sampling{LogitBias: bias}, 40)
	if r.fired {
		t.Fatalf("a start pattern fired after text: %q", r.out)
	}
}

// TestLazyAcceptAllocs: watching for the trigger allocates nothing per
// token (Hermes' marker anywhere, and the generic start pattern while the
// output is short).
func TestLazyAcceptAllocs(t *testing.T) {
	m, _, _, _ := qwenTools(t, grammarTools)
	vocabReady(m) // its rendering allocates, and AllocsPerRun counts the whole process
	c := lazyConstraint(t, m, grammarTools)
	d := &llamaDecoder{m: m}
	c = d.lazyStart(0, c)
	defer yz.SamplerFree(c.stage)
	toks := textTokens(t, m, "The weather in Paris is mild, <tool said> with a chance of rain; <tool_ call> ")
	for _, tok := range toks { // each token's piece is rendered once, on first sight
		d.lazyAccept(0, tok)
	}
	i := 0
	allocs := testing.AllocsPerRun(500, func() {
		d.lazyAccept(0, toks[i%len(toks)])
		i++
	})
	if allocs != 0 || d.lazy.seq(0).fired {
		t.Fatalf("%v allocations per token (fired %v)", allocs, d.lazy.seq(0).fired)
	}
	generic, err := newLazyTrigger(toolcall.Generic)
	if err != nil {
		t.Fatal(err)
	}
	g := d.lazyStart(1, constraint{text: c.text, trig: generic})
	defer yz.SamplerFree(g.stage)
	ws := textTokens(t, m, " {")
	d.lazyAccept(1, ws[0])
	allocs = testing.AllocsPerRun(50, func() { d.lazyAccept(1, ws[0]) })
	if allocs != 0 {
		t.Fatalf("start pattern: %v allocations per token", allocs)
	}
}

// TestLazyTriggerAfterReasoning: under tool_choice auto a call marker
// inside the reasoning block does not fire the trigger, the first one
// after </think> does: Qwen3 (the output may open the block; one that
// does not is watched from its start) and DeepSeek R1's distill with
// thinking on (the prompt opens it).
func TestLazyTriggerAfterReasoning(t *testing.T) {
	initLib(t)
	for _, tc := range []struct {
		vocab, template  string
		want             reasoningAt
		reasoning, after string // the output in two parts: the trigger must fire at the end of after only
	}{
		{"qwen2", "Qwen-Qwen3-0.6B", reasonMayOpen, "<think>\nMaybe <tool_call> is what I need.\n</think>\n\nSure. ", "<tool_call>"},
		{"qwen2", "Qwen-Qwen3-0.6B", reasonMayOpen, "", "Sure. <tool_call>"},
		{"qwen2", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", reasonInside, "I would write <｜tool▁calls▁begin｜> next.</think>\n\n", "<｜tool▁calls▁begin｜>"},
	} {
		m, err := Open(testenv.LlamaChatModel(t, tc.vocab, tc.template), Options{ContextSize: 2048, Slots: 1})
		if err != nil {
			t.Fatal(err)
		}
		msgs := []Message{{Role: "user", Content: "Weather in Paris?"}}
		// Thinking on: the R1 distill's template (as packaged for
		// llama.cpp) opens the block only when asked.
		prompt, err := m.ChatPromptContext(backends.WithThinking(t.Context(), true), msgs, grammarTools, true)
		if err != nil {
			t.Fatal(err)
		}
		req := Request{Messages: msgs, Prompt: prompt, Tools: grammarTools,
			ToolChoice: backends.ToolChoice{Mode: backends.ToolChoiceAuto, Grammar: callGrammarOf(t, grammarTools)}}
		c, err := m.constraint(&req)
		if err != nil || c.trig == nil || c.think != tc.want {
			t.Fatalf("%s: constraint %+v, %v; want a lazy one, reasoning %d", tc.template, c, err, tc.want)
		}
		d := &llamaDecoder{m: m}
		c = d.lazyStart(0, c)
		for _, tok := range textTokens(t, m, tc.reasoning) {
			d.lazyAccept(0, tok)
		}
		if d.lazy.seq(0).fired {
			t.Fatalf("%s: fired inside the reasoning %q", tc.template, tc.reasoning)
		}
		for _, tok := range textTokens(t, m, tc.after) {
			d.lazyAccept(0, tok)
		}
		if !d.lazy.seq(0).fired {
			t.Fatalf("%s: %q then %q did not fire", tc.template, tc.reasoning, tc.after)
		}
		yz.SamplerFree(c.stage)
		_ = m.Close()
	}
}

// TestLazyTriggerFamilies: the watch fires on each family's marker (or
// start) as the real template's vocabulary splits it, after text, and not
// before the marker is complete: the grammar takes the marker as the
// start of its calls.
func TestLazyTriggerFamilies(t *testing.T) {
	initLib(t)
	starts := map[string][]string{ // text before the marker, then the marker (and what follows it in the same go)
		"meta-llama-Llama-3.1-8B-Instruct":              {"", `{"name"`, "Searching. ", "<|python_tag|>"},
		"mistralai-Mistral-Nemo-Instruct-2407":          {"Sure. ", "[TOOL_CALLS]"},
		"Mistral-Small-3.2-24B-Instruct-2506":           {"Sure. ", "[TOOL_CALLS]"},
		"deepseek-ai-DeepSeek-V3.1":                     {"Sure. ", "<｜tool▁calls▁begin｜>"},
		"meetkai-functionary-medium-v3.1":               {"Sure. ", "<function="},
		"meetkai-functionary-medium-v3.2":               {"", "add\n{", "all\nSure.", ">>>"},
		"CohereForAI-c4ai-command-r-plus-tool_use":      {"Sure.\n", "Action:"},
		"CohereForAI-c4ai-command-r7b-12-2024-tool_use": {"Sure. ", "<|START_ACTION|>"},
		"ibm-granite-granite-3.3-2B-Instruct":           {"Sure. ", "<|tool_call|>"},
	}
	g := callGrammarOf(t, grammarTools)
	for _, fc := range familyCases {
		pairs, ok := starts[fc.template]
		if !ok {
			continue
		}
		m, err := Open(testenv.LlamaChatModel(t, fc.vocab, fc.template), Options{ContextSize: 2048, Slots: 1})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(pairs); i += 2 {
			label := fmt.Sprintf("%s %q+%q", fc.template, pairs[i], pairs[i+1])
			req := Request{Tools: grammarTools, ToolChoice: backends.ToolChoice{Mode: backends.ToolChoiceAuto, Grammar: g}}
			c, err := m.constraint(&req)
			if err != nil || c.trig == nil {
				t.Fatalf("%s: constraint %+v, %v", label, c, err)
			}
			d := &llamaDecoder{m: m}
			c = d.lazyStart(0, c)
			toks := textTokens(t, m, pairs[i]+pairs[i+1])
			for k, tok := range toks {
				d.lazyAccept(0, tok)
				if last := k == len(toks)-1; d.lazy.seq(0).fired != last {
					t.Fatalf("%s: fired %v after token %d of %d", label, d.lazy.seq(0).fired, k+1, len(toks))
				}
			}
			yz.SamplerFree(c.stage)
		}
		_ = m.Close()
	}
}

// BenchmarkLazyAccept measures the trigger watch's cost per token of text
// that holds no marker (Hermes' <tool_call>), the cost a tool_choice auto
// generation adds to each token before its first call.
func BenchmarkLazyAccept(b *testing.B) {
	initLib(b)
	m, err := Open(testenv.LlamaChatModel(b, "qwen2", "Qwen-Qwen2.5-7B-Instruct"), Options{ContextSize: 2048, Slots: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = m.Close() }()
	g, err := grammar.ToolCall([]grammar.Tool{{Name: "f"}}, grammar.Options{})
	if err != nil {
		b.Fatal(err)
	}
	c, err := m.constraint(&Request{Tools: []Tool{{Name: "f"}}, ToolChoice: backends.ToolChoice{Mode: backends.ToolChoiceAuto, Grammar: g}})
	if err != nil {
		b.Fatal(err)
	}
	d := &llamaDecoder{m: m}
	c = d.lazyStart(0, c)
	defer yz.SamplerFree(c.stage)
	ids, err := m.Tokenize("The weather in Paris is mild today, <tool said> with a chance of rain in the evening. ", false, false)
	if err != nil {
		b.Fatal(err)
	}
	for _, id := range ids {
		d.lazyAccept(0, yz.Token(id))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		d.lazyAccept(0, yz.Token(ids[i%len(ids)]))
	}
}

// vocabReady waits until m's vocabulary tables, made ahead on a goroutine
// of their own (vocab_ahead.go), are done, and leaves them for the
// scheduler. Only while no request runs (the scheduler takes them then).
func vocabReady(m *Model) {
	d, ok := m.sch.dec.(*llamaDecoder)
	if !ok || d.lazy.ahead == nil {
		return
	}
	tables := <-d.lazy.ahead
	d.lazy.ahead <- tables
}
