package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/toolcall"
	"github.com/modeld/modeld/internal/testenv"
)

// familyCases are the real templates of each call family, with the real
// vocabulary nearest to the family's own among those the test assets hold.
var familyCases = []struct {
	family          toolcall.Family
	vocab, template string
}{
	{toolcall.Hermes, "llama-bpe", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use"},
	{toolcall.Hermes, "llama-bpe", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"},
	{toolcall.Llama3, "llama-bpe", "meta-llama-Llama-3.1-8B-Instruct"},
	{toolcall.Llama3, "llama-bpe", "meta-llama-Llama-3.2-3B-Instruct"},
	{toolcall.Llama3, "llama-bpe", "meta-llama-Llama-3.3-70B-Instruct"},
	{toolcall.Mistral, "llama-spm", "mistralai-Mistral-Nemo-Instruct-2407"},
	{toolcall.Mistral, "llama-spm", "Mistral-Small-3.2-24B-Instruct-2506"},
	{toolcall.DeepSeek, "deepseek-llm", "deepseek-ai-DeepSeek-V3.1"},
	{toolcall.FunctionaryV31, "llama-bpe", "meetkai-functionary-medium-v3.1"},
	{toolcall.FunctionaryV32, "llama-bpe", "meetkai-functionary-medium-v3.2"},
	{toolcall.CommandR, "command-r", "CohereForAI-c4ai-command-r-plus-tool_use"},
	{toolcall.CommandR, "command-r", "CohereForAI-c4ai-command-r7b-12-2024-tool_use"},
	{toolcall.Granite, "starcoder", "ibm-granite-granite-3.3-2B-Instruct"},
}

// familyModel opens the random-weight model with vocab and template,
// checks its family, and returns it with the prompt of a question with
// grammarTools offered.
func familyModel(t *testing.T, fam toolcall.Family, vocab, template string) (*Model, []int32) {
	t.Helper()
	initLib(t)
	m, err := Open(testenv.LlamaChatModel(t, vocab, template), Options{ContextSize: 4096, Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if f := toolcall.Detect(m.Info().ChatTemplate); f != fam {
		t.Fatalf("family %s, want %s", f, fam)
	}
	prompt, err := m.ChatPrompt([]Message{{Role: "user", Content: "Weather in Paris, and 2+3?"}}, grammarTools, true)
	if err != nil {
		t.Fatal(err)
	}
	return m, prompt
}

// TestToolGrammarFamilies: for each family's real template, the
// random-weight model under tool_choice required (one seed and greedily),
// a named function and parallel_tool_calls false writes only calls in the
// family's syntax: finish tool_calls, no content, calls of the allowed
// tools with arguments their schemas accept, the streamed deltas equal to
// the parse of the whole output (exactly one call with Single). Under none
// the output is read for no calls; under auto over two seeds it is text
// without calls or text and then complete calls.
func TestToolGrammarFamilies(t *testing.T) {
	check := map[string]*jsonschema.Schema{}
	for _, tl := range grammarTools {
		check[tl.Name] = schemaValidator(t, tl.Name, string(tl.Parameters))
	}
	g := callGrammarOf(t, grammarTools)
	addOnly := callGrammarOf(t, grammarTools[1:])
	for _, fc := range familyCases {
		t.Run(fc.template, func(t *testing.T) {
			// Each family has a model of its own and nothing else is shared:
			// two at once keep both cores busy (what a model generates does not
			// depend on what runs beside it).
			t.Parallel()
			m, prompt := familyModel(t, fc.family, fc.vocab, fc.template)
			bias := closingBias(m)
			for _, tc := range []struct {
				name   string
				seed   int64
				choice backends.ToolChoice
				want   []string
			}{
				{"required", -1, backends.ToolChoice{Mode: backends.ToolChoiceRequired, Grammar: g}, []string{"get_weather", "add"}},
				{"required", 1, backends.ToolChoice{Mode: backends.ToolChoiceRequired, Grammar: g}, []string{"get_weather", "add"}},
				{"named single", 2, backends.ToolChoice{Mode: backends.ToolChoiceFunction, Name: "add", Single: true, Grammar: addOnly}, []string{"add"}},
			} {
				label := fmt.Sprintf("%s seed %d", tc.name, tc.seed)
				samp := Sampling{LogitBias: bias}
				if tc.seed >= 0 {
					samp.Temperature, samp.Seed = 1, &tc.seed
				}
				r := runTools(t, m, Request{Prompt: prompt, MaxTokens: 800, Sampling: samp, Tools: grammarTools, ToolChoice: tc.choice})
				if r.final.Finish != backends.FinishToolCalls || len(r.calls) == 0 || strings.TrimSpace(r.content) != "" {
					t.Fatalf("%s: finish %s, %d calls, content %q: %q", label, r.final.Finish, len(r.calls), r.content, r.raw)
				}
				if tc.choice.Single && len(r.calls) != 1 {
					t.Fatalf("%s: %d calls, want 1: %q", label, len(r.calls), r.raw)
				}
				checkCalls(t, label, fc.family, r, check)
				for _, c := range r.calls {
					if !slices.Contains(tc.want, c.Name) {
						t.Fatalf("%s: call of %s, want one of %v", label, c.Name, tc.want)
					}
				}
				t.Logf("%s: %d calls: %q", label, len(r.calls), r.raw)
			}
			none := runTools(t, m, Request{Prompt: prompt, MaxTokens: 40, Sampling: Sampling{LogitBias: bias}, Tools: grammarTools,
				ToolChoice: backends.ToolChoice{Mode: backends.ToolChoiceNone, Grammar: g}})
			if len(none.calls) > 0 || none.final.Finish == backends.FinishToolCalls || strings.TrimSpace(none.content) != strings.TrimSpace(none.raw) {
				t.Fatalf("none: finish %s, calls %+v, content %q of %q", none.final.Finish, none.calls, none.content, none.raw)
			}
			for _, seed := range []int64{1, 2} {
				label := fmt.Sprintf("auto seed %d", seed)
				r := runTools(t, m, Request{Prompt: prompt, MaxTokens: 100, Sampling: Sampling{Temperature: 1, Seed: &seed, LogitBias: bias},
					Tools: grammarTools, ToolChoice: backends.ToolChoice{Mode: backends.ToolChoiceAuto, Grammar: g}})
				if len(r.calls) == 0 {
					if r.final.Finish == backends.FinishToolCalls {
						t.Fatalf("%s: finish tool_calls without calls: %q", label, r.raw)
					}
					continue
				}
				if r.final.Finish != backends.FinishToolCalls {
					t.Fatalf("%s: calls but finish %s: %q", label, r.final.Finish, r.raw)
				}
				checkCalls(t, label, fc.family, r, check)
			}
		})
	}
}

// TestToolGrammarThinks: for templates that think, a call under tool_choice
// required may follow a bounded reasoning block, which goes to the
// reasoning and not the content: DeepSeek R1's distill and QwQ with
// enable_thinking true open the block in the prompt (the grammar closes it, then the calls), Qwen3 with
// thinking on may open one, Qwen3 with enable_thinking false has none
// (the grammar allows no <think>). Each run's calls parse and validate.
func TestToolGrammarThinks(t *testing.T) {
	check := map[string]*jsonschema.Schema{}
	for _, tl := range grammarTools {
		check[tl.Name] = schemaValidator(t, tl.Name, string(tl.Parameters))
	}
	g := callGrammarOf(t, grammarTools)
	for _, tc := range []struct {
		family          toolcall.Family
		vocab, template string
		vars            map[string]any
		opens, allowed  bool // the prompt opens the block; the grammar allows one
	}{
		{toolcall.DeepSeek, "qwen2", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", map[string]any{"enable_thinking": true}, true, true},
		{toolcall.Hermes, "qwen2", "Qwen-QwQ-32B", map[string]any{"enable_thinking": true}, true, true},
		{toolcall.Hermes, "qwen2", "Qwen-Qwen3-0.6B", nil, false, true},
		{toolcall.Hermes, "qwen2", "Qwen-Qwen3-0.6B", map[string]any{"enable_thinking": false}, false, false},
	} {
		name := tc.template
		if on, set := tc.vars["enable_thinking"]; set {
			name += fmt.Sprintf(" thinking %v", on)
		}
		t.Run(name, func(t *testing.T) {
			initLib(t)
			m, err := Open(testenv.LlamaChatModel(t, tc.vocab, tc.template), Options{ContextSize: 4096, Slots: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close() })
			if f := toolcall.Detect(m.Info().ChatTemplate); f != tc.family {
				t.Fatalf("family %s, want %s", f, tc.family)
			}
			msgs := []Message{{Role: "user", Content: "Weather in Paris?"}}
			ctx := backends.WithTemplateVars(t.Context(), tc.vars)
			prompt, err := m.ChatPromptContext(ctx, msgs, grammarTools, true)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.promptOpensThink(prompt); got != tc.opens {
				t.Fatalf("prompt opens a thinking block: %v, want %v", got, tc.opens)
			}
			req := Request{Messages: msgs, Prompt: prompt, Tools: grammarTools,
				ToolChoice: backends.ToolChoice{Mode: backends.ToolChoiceRequired, Grammar: g}}
			c, err := m.constraint(&req)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(c.text, "think-text") != tc.allowed {
				t.Fatalf("grammar allows a reasoning block: %v, want %v", !tc.allowed, tc.allowed)
			}
			bias := closingBias(m)
			for _, tok := range textTokens(t, m, "</think>") { // so the random walk reaches the end of the block
				bias[int32(tok)] += 4
			}
			reasoned := 0
			for _, seed := range []int64{1, 2, 3} {
				label := fmt.Sprintf("seed %d", seed)
				req.Sampling = Sampling{Temperature: 1, Seed: &seed, LogitBias: bias}
				req.MaxTokens = 1500
				r := runTools(t, m, req)
				reasoning := r.reasoning
				if r.final.Finish != backends.FinishToolCalls || len(r.calls) == 0 || strings.TrimSpace(r.content) != "" {
					t.Fatalf("%s: finish %s, %d calls, content %q: %q", label, r.final.Finish, len(r.calls), r.content, r.raw)
				}
				if strings.Contains(reasoning, "</think>") {
					t.Fatalf("%s: markup in the reasoning %q", label, reasoning)
				}
				if !tc.allowed && (reasoning != "" || strings.Contains(r.raw, "<think>")) {
					t.Fatalf("%s: reasoning %q with thinking off: %q", label, reasoning, r.raw)
				}
				if tc.opens && !strings.Contains(r.raw, "</think>") {
					t.Fatalf("%s: the block the prompt opens is not closed: %q", label, r.raw)
				}
				if reasoning != "" {
					reasoned++
				}
				after := r
				if k := strings.LastIndex(r.raw, "</think>"); k >= 0 {
					after.raw = r.raw[k+len("</think>"):]
				}
				checkCalls(t, label, tc.family, after, check)
				t.Logf("%s: reasoning %d bytes, %d calls: %q", label, len(reasoning), len(r.calls), r.raw)
			}
			if tc.opens && reasoned == 0 {
				t.Fatal("no run reasoned")
			}
		})
	}
}
