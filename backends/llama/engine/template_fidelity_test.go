package engine

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modeld/modeld/internal/chattmpl"
	"github.com/modeld/modeld/internal/chattmpl/chattmpltest"
	"github.com/modeld/modeld/internal/testenv"
)

// tokenFidelityModels pair real templates with the real vocabularies they
// ship with (the random-weight models of testenv.LlamaChatModel).
var tokenFidelityModels = []struct{ vocab, template string }{
	{"qwen2", "Qwen-Qwen2.5-7B-Instruct"},
	{"qwen2", "Qwen-Qwen3-0.6B"},
	{"qwen2", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"},
	{"qwen35", "Qwen3.5-4B"},
	{"llama-bpe", "meta-llama-Llama-3.1-8B-Instruct"},
	{"llama-bpe", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"},
	{"llama-spm", "mistralai-Mistral-Nemo-Instruct-2407"},
	{"llama-spm", "Mistral-Small-3.2-24B-Instruct-2506"},
	{"phi-3", "microsoft-Phi-3.5-mini-instruct"},
	{"gemma-4", "google-gemma-4-31B-it"},
	{"deepseek-llm", "deepseek-ai-DeepSeek-V3.1"},
	{"command-r", "CohereForAI-c4ai-command-r7b-12-2024-tool_use"},
	{"starcoder", "ibm-granite-granite-3.3-2B-Instruct"},
}

// TestChatPromptTokensMatchReference: for real templates with their real
// vocabularies, over every conversation shape the reference renders as it
// is, the ids of ChatPrompt (what generation, usage and /v1/tokenize see)
// equal the tokenization of the reference's text with the control tokens
// parsed, one BOS as the vocabulary asks. The rendered text and the ids are
// one thing.
func TestChatPromptTokensMatchReference(t *testing.T) {
	initLib(t)
	templates := chattmpltest.RealTemplates(t)
	type run struct {
		m    *Model
		conv chattmpltest.Conversation
	}
	var cases []chattmpltest.OracleCase
	runs := map[string]run{}
	for _, mc := range tokenFidelityModels {
		m, err := Open(testenv.LlamaChatModel(t, mc.vocab, mc.template), Options{ContextSize: 2048})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		m.tmpl.now = func() time.Time { return chattmpltest.FixedNow }
		tmpl, err := chattmpl.Compile(templates[mc.template])
		if err != nil {
			t.Fatal(err)
		}
		bos, eos, err := m.specialTexts()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chattmpltest.Conversations() {
			in := c.Input
			in.BOS, in.EOS = bos, eos
			vars, err := tmpl.Vars(in)
			if err != nil {
				t.Fatal(err)
			}
			id := mc.template + "/" + c.Name
			cases = append(cases, chattmpltest.OracleCase{ID: id, Template: mc.template, Vars: vars})
			runs[id] = run{m, c}
		}
	}
	ref := chattmpltest.Oracle(t, templates, cases)
	compared := 0
	for _, c := range cases {
		want := ref[c.ID]
		r := runs[c.ID]
		if want.Error != "" {
			continue // refused or polyfilled: TestFidelityAgainstReference
		}
		in := r.conv.Input
		ids, err := r.m.ChatPrompt(in.Messages, in.Tools, in.AddGenerationPrompt)
		if err != nil {
			t.Errorf("%s: %v", c.ID, err)
			continue
		}
		text := want.Text
		bos, _, _ := r.m.specialTexts()
		if r.m.info.AddBOS && bos != "" {
			text = strings.TrimPrefix(text, bos)
		}
		wantIDs, err := r.m.Tokenize(text, true, true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, wantIDs) {
			got, _ := r.m.Detokenize(ids, true)
			exp, _ := r.m.Detokenize(wantIDs, true)
			i := 0
			for i < len(got) && i < len(exp) && got[i] == exp[i] {
				i++
			}
			lo := max(0, i-60)
			t.Errorf("%s: ids differ from the reference's tokens at byte %d of the text\nmodeld    %q\nreference %q", c.ID, i, got[lo:min(len(got), i+60)], exp[lo:min(len(exp), i+60)])
			continue
		}
		compared++
	}
	t.Logf("%d prompts token for token equal to the reference's text tokenized", compared)
	if compared < len(cases)/2 {
		t.Errorf("only %d of %d prompts compared", compared, len(cases))
	}
}
