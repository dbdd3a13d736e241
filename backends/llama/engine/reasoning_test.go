package engine

import (
	"context"
	"os"
	"strings"
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/jinja"
	"github.com/modeld/modeld/internal/testenv"
)

// splitAll feeds pieces through a splitter and joins what it releases.
func splitAll(inside bool, pieces []string) (content, reasoning string) {
	sp := newThinkSplitter(inside)
	for _, p := range pieces {
		c, r := sp.Feed(p)
		content += c
		reasoning += r
	}
	c, r := sp.Close()
	return content + c, reasoning + r
}

// TestThinkSplitterEverySplit: a Qwen3-like output (the model opens
// <think>) and a DeepSeek-R1-like one (the prompt opened it) give the same
// reasoning and content however the text is cut into two or three pieces,
// markers split included.
func TestThinkSplitterEverySplit(t *testing.T) {
	cases := []struct {
		name, text         string
		inside             bool
		content, reasoning string
	}{
		{"qwen3", "<think>\nThe user wants a prime.\n2 is prime.\n</think>\n\n2 is prime.", false, "2 is prime.", "The user wants a prime.\n2 is prime."},
		{"deepseek-r1", "Okay, 3 works.\n</think>\n\nThree.", true, "Three.", "Okay, 3 works."},
		{"no think", "Just an answer </think> here.", false, "Just an answer </think> here.", ""},
		{"leading space then think", "\n <think>x</think>y", false, "y", "x"},
		{"empty block", "<think>\n\n</think>\n\nHi", false, "Hi", ""},
		{"cut inside", "<think>still thinking </thi", false, "", "still thinking </thi"},
		{"almost a marker", "<think>a </thinking> b</think>c", false, "c", "a </thinking> b"},
		{"partial open only", "<thi", false, "<thi", ""},
	}
	for _, c := range cases {
		for i := 0; i <= len(c.text); i++ {
			for j := i; j <= len(c.text); j++ {
				content, reasoning := splitAll(c.inside, []string{c.text[:i], c.text[i:j], c.text[j:]})
				if content != c.content || reasoning != c.reasoning {
					t.Fatalf("%s cut at %d,%d: content %q reasoning %q, want %q and %q", c.name, i, j, content, reasoning, c.content, c.reasoning)
				}
			}
		}
	}
}

// TestThinkSplitterHoldsPartialClose: a </think> split across pieces is
// never released as reasoning.
func TestThinkSplitterHoldsPartialClose(t *testing.T) {
	sp := newThinkSplitter(true)
	if c, r := sp.Feed("done.</th"); c != "" || r != "done." {
		t.Fatalf("first piece gave content %q reasoning %q, want \"\" and \"done.\"", c, r)
	}
	if c, r := sp.Feed("ink>\n\nAnswer"); c != "Answer" || r != "" {
		t.Fatalf("second piece gave content %q reasoning %q, want \"Answer\" and \"\"", c, r)
	}
}

// runScript runs a scripted generation through the scheduler (each piece
// one token) and the engine's event conversion.
func runScript(t *testing.T, script []string, tmpl string, inside, tools bool) []Event {
	t.Helper()
	dec := &scriptDecoder{fakeDecoder: newFakeDecoder(), n: len(script)}
	s := newSchedulerWith(dec, 1, 8, 1<<20, 0, Hooks{})
	go s.loop()
	t.Cleanup(s.stop)
	r := &request{ctx: context.Background(), prompt: []yz.Token{10, 11, 12}, budget: 64, stream: newStream(),
		render: func(tok yz.Token) string { return script[tok-100] }}
	if err := s.submit(r); err != nil {
		t.Fatal(err)
	}
	go r.stream.pump()
	var evs []Event
	for ev := range outputEvents(r.stream.out, tmpl, thinksTemplate(tmpl), inside, tools) {
		evs = append(evs, ev)
	}
	return evs
}

func readTemplate(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(testenv.LlamaTemplate(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSchedulerReasoningQwen3: Qwen3's real template, an output that thinks
// (with </think> split across tokens and a tool-call lookalike inside the
// thinking) then calls a tool: the reasoning goes to Reasoning, the call is
// parsed from the content only, and no marker reaches either.
func TestSchedulerReasoningQwen3(t *testing.T) {
	tmpl := readTemplate(t, "Qwen-Qwen3-0.6B")
	script := []string{"<think>", "\nI could", " write <tool_call> here.", "\n</th", "ink>", "\n\n", "<tool_call>", "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n", "</tool_call>"}
	evs := runScript(t, script, tmpl, false, true)
	var content, reasoning, args string
	for _, ev := range evs {
		content += ev.Text
		reasoning += ev.Reasoning
		for _, d := range ev.ToolCalls {
			args += d.Arguments
		}
	}
	last := evs[len(evs)-1]
	if reasoning != "I could write <tool_call> here." || content != "" || args != `{"city": "Paris"}` || last.Finish != backends.FinishToolCalls {
		t.Errorf("reasoning %q content %q args %q finish %s", reasoning, content, args, last.Finish)
	}
}

// TestSchedulerReasoningDeepSeekR1: the R1 distill's real template opens
// <think> in the generation prompt; the output starts inside the block and
// streams its reasoning, then the answer, with no tool parsing asked.
func TestSchedulerReasoningDeepSeekR1(t *testing.T) {
	tmpl := readTemplate(t, "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B")
	script := []string{"Okay", ", 2 is", " prime.\n", "</think>", "\n\n", "2", "."}
	evs := runScript(t, script, tmpl, true, false)
	var content, reasoning string
	var reasoningEvents int
	for _, ev := range evs {
		if ev.Reasoning != "" {
			reasoningEvents++
		}
		content += ev.Text
		reasoning += ev.Reasoning
	}
	if reasoning != "Okay, 2 is prime." || content != "2." || reasoningEvents < 2 {
		t.Errorf("reasoning %q (%d events) content %q", reasoning, reasoningEvents, content)
	}
	if last := evs[len(evs)-1]; !last.Done || last.Finish != FinishStop {
		t.Errorf("last event %+v", last)
	}
}

// TestThinkingTemplatesDetected: the reasoning templates of the assets are
// recognised, the others not; the rendered generation prompt tells whether
// the output begins inside the block.
func TestThinkingTemplatesDetected(t *testing.T) {
	for _, c := range []struct {
		name           string
		thinks, inside bool
	}{
		{"Qwen-Qwen3-0.6B", true, false},
		{"Qwen-QwQ-32B", true, true},
		{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", true, true},
		{"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", true, true},
		{"Qwen-Qwen2.5-7B-Instruct", false, false},
		{"meta-llama-Llama-3.1-8B-Instruct", false, false},
	} {
		src := readTemplate(t, c.name)
		if got := thinksTemplate(src); got != c.thinks {
			t.Errorf("%s: thinksTemplate = %v, want %v", c.name, got, c.thinks)
		}
		out := renderWith(t, src, map[string]any{"enable_thinking": true})
		if got := promptOpensThink(out); got != c.inside {
			t.Errorf("%s: promptOpensThink = %v, want %v; prompt ends %q", c.name, got, c.inside, out[max(0, len(out)-40):])
		}
	}
}

// TestQwen3EnableThinkingFalse: with enable_thinking false Qwen3's real
// template closes an empty thinking block in the generation prompt, so the
// output is the answer.
func TestQwen3EnableThinkingFalse(t *testing.T) {
	out := renderWith(t, readTemplate(t, "Qwen-Qwen3-0.6B"), map[string]any{"enable_thinking": false})
	if !strings.HasSuffix(out, "<|im_start|>assistant\n<think>\n\n</think>\n\n") || promptOpensThink(out) {
		t.Errorf("prompt ends %q", out[max(0, len(out)-60):])
	}
}

func renderWith(t *testing.T, src string, extra map[string]any) string {
	t.Helper()
	vars := map[string]any{
		"messages":              []any{map[string]any{"role": "user", "content": realUser}},
		"add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
	}
	for k, v := range extra {
		vars[k] = v
	}
	tmpl, err := jinja.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tmpl.Render(vars, jinja.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// openChatModel opens a tiny model with a real vocabulary and template.
func openChatModel(t *testing.T, vocab, tmpl string) *Model {
	t.Helper()
	initLib(t)
	m, err := Open(testenv.LlamaChatModel(t, vocab, tmpl), Options{ContextSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// TestChatPromptEnableThinking: through ChatPromptContext, Qwen3's real
// template with the qwen2 vocabulary renders a thinking generation prompt
// by default and an empty, closed block with enable_thinking false (the
// variable the context carries); the DeepSeek R1 distill's template keeps
// its own default (closed) until thinking is asked for.
func TestChatPromptEnableThinking(t *testing.T) {
	msgs := []Message{{Role: "user", Content: realUser}}
	prompt := func(m *Model, ctx context.Context) string {
		t.Helper()
		ids, err := m.ChatPromptContext(ctx, msgs, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		text, err := m.Detokenize(ids, true)
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	qwen := openChatModel(t, "qwen2", "Qwen-Qwen3-0.6B")
	on := prompt(qwen, context.Background())
	off := prompt(qwen, backends.WithTemplateVars(context.Background(), map[string]any{"enable_thinking": false}))
	if !strings.HasSuffix(on, "<|im_start|>assistant\n") || strings.Contains(on, "<think>") {
		t.Errorf("Qwen3 default prompt ends %q", on[max(0, len(on)-60):])
	}
	if !strings.HasSuffix(off, "<|im_start|>assistant\n<think>\n\n</think>\n\n") || promptOpensThink(off) {
		t.Errorf("Qwen3 enable_thinking false prompt ends %q", off[max(0, len(off)-60):])
	}
	// The R1 distill's template closes the block unless enable_thinking is
	// set: its default holds until the dialect asks (backends.WithThinking).
	r1 := openChatModel(t, "qwen2", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B")
	def := prompt(r1, backends.WithTemplateVars(context.Background(), map[string]any{"x": 1}))
	if promptOpensThink(def) || !strings.HasSuffix(def, "<think>\n</think>") {
		t.Errorf("R1 distill default prompt ends %q, want the template's closed block", def[max(0, len(def)-60):])
	}
	thinking := prompt(r1, backends.WithThinking(context.Background(), true))
	if !promptOpensThink(thinking) {
		t.Errorf("R1 distill prompt with thinking on ends %q, want an open <think>", thinking[max(0, len(thinking)-60):])
	}
	qwenOff := prompt(qwen, backends.WithThinking(context.Background(), false))
	if qwenOff != off {
		t.Errorf("Qwen3 with WithThinking(false) ends %q, want what enable_thinking false renders", qwenOff[max(0, len(qwenOff)-60):])
	}
	kept := prompt(qwen, backends.WithThinking(backends.WithTemplateVars(context.Background(), map[string]any{"enable_thinking": true}), false))
	if kept != on {
		t.Errorf("chat_template_kwargs' enable_thinking must win over the dialect's switch; prompt ends %q", kept[max(0, len(kept)-60):])
	}
}
