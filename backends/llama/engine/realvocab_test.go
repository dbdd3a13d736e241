package engine

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
	"github.com/modeld/modeld/models"
)

// realFamily pairs a real chat template of the llama.cpp test assets with the
// real vocabulary of its model family (or the closest one the assets hold).
type realFamily struct {
	name     string
	vocab    string // vocab/ggml-vocab-<vocab>.gguf
	template string // templates/<template>.jinja
	// markers must appear in the rendered (system, user) prompt.
	markers []string
	// special are markers that are control tokens of the vocabulary: the
	// rendered prompt must tokenize each of them to its single id.
	special []string
}

// realFamilies are the chat families modeld's tests work with. Hermes 2 Pro
// adds the ChatML markers to the Llama 3 vocabulary as control tokens; of the
// assets' vocabularies, Qwen2's has them as control tokens, so Hermes takes
// it. The DeepSeek R1 distills add their <｜User｜> markers to the Qwen2 and
// Llama 3 vocabularies; the vocabulary-only files hold the base vocabularies,
// so there those markers tokenize as text. No vocabulary of the assets holds
// Mistral's [TOOL_CALLS] (the Tekken vocabulary is not there): Mistral Nemo
// takes the SentencePiece Llama/Mistral vocabulary, where [INST] is text.
var realFamilies = []realFamily{
	{name: "qwen2.5", vocab: "qwen2", template: "Qwen-Qwen2.5-7B-Instruct",
		markers: []string{"<|im_start|>system\n", "<|im_start|>user\n", "<|im_end|>", "<|im_start|>assistant\n"},
		special: []string{"<|im_start|>", "<|im_end|>"}},
	{name: "llama3.1", vocab: "llama-bpe", template: "meta-llama-Llama-3.1-8B-Instruct",
		markers: []string{"<|start_header_id|>system<|end_header_id|>", "<|start_header_id|>user<|end_header_id|>", "<|eot_id|>", "<|start_header_id|>assistant<|end_header_id|>"},
		special: []string{"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}},
	{name: "llama3.2", vocab: "llama-bpe", template: "meta-llama-Llama-3.2-3B-Instruct",
		markers: []string{"<|start_header_id|>system<|end_header_id|>", "<|start_header_id|>user<|end_header_id|>", "<|eot_id|>"},
		special: []string{"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}},
	{name: "mistral-nemo", vocab: "llama-spm", template: "mistralai-Mistral-Nemo-Instruct-2407",
		markers: []string{"[INST]", "[/INST]"}},
	{name: "hermes2pro", vocab: "qwen2", template: "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",
		markers: []string{"<|im_start|>system\n", "<|im_start|>user\n", "<|im_start|>assistant\n"},
		special: []string{"<|im_start|>", "<|im_end|>"}},
	{name: "deepseek-r1", vocab: "qwen2", template: "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
		markers: []string{"<｜User｜>", "<｜Assistant｜>"}},
	{name: "phi3.5", vocab: "phi-3", template: "microsoft-Phi-3.5-mini-instruct",
		markers: []string{"<|system|>", "<|user|>", "<|end|>", "<|assistant|>"},
		special: []string{"<|system|>", "<|user|>", "<|end|>", "<|assistant|>"}},
}

const (
	realSystem = "You are a terse assistant."
	realUser   = "Name one prime number."
)

// TestRealVocabFamiliesImportLoadRenderGenerate builds, for each family, a tiny
// random-weight model carrying the family's real vocabulary and chat template,
// imports it into a store, loads the stored blob in the engine, renders a
// (system, user) chat with the project's renderer, tokenizes it (the family's
// control tokens to their single ids), and runs greedy generation.
func TestRealVocabFamiliesImportLoadRenderGenerate(t *testing.T) {
	initLib(t)
	store, err := models.Open(t.TempDir(), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range realFamilies {
		t.Run(f.name, func(t *testing.T) {
			vocab, err := ggufgen.ReadVocab(testenv.LlamaVocab(t, f.vocab))
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := os.ReadFile(testenv.LlamaTemplate(t, f.template))
			if err != nil {
				t.Fatal(err)
			}
			src := testenv.LlamaChatModel(t, f.vocab, f.template)
			man, err := store.Import(context.Background(), src, models.ImportOptions{Name: "test/" + f.name}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if man.GGUF == nil || !man.GGUF.ChatTemplate || man.GGUF.Tokenizer != vocab.Model || man.GGUF.Architecture != "llama" {
				t.Fatalf("manifest GGUF info %+v, want llama with tokenizer %s and a chat template", man.GGUF, vocab.Model)
			}
			file, ok := man.File(man.GGUF.File)
			if !ok {
				t.Fatalf("manifest has no file %q", man.GGUF.File)
			}
			blob, err := store.BlobPath(file.Digest)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Open(blob, Options{ContextSize: 512})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := m.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			info := m.Info()
			if info.VocabSize != len(vocab.Tokens) || info.ChatTemplate != string(tmpl) {
				t.Fatalf("vocab size %d (want %d), template of %d bytes (want %d)", info.VocabSize, len(vocab.Tokens), len(info.ChatTemplate), len(tmpl))
			}
			if int(info.BOS) != vocab.SpecialID("bos") || int(info.EOS) != vocab.SpecialID("eos") {
				t.Fatalf("BOS/EOS %d/%d, want the vocabulary's %d/%d", info.BOS, info.EOS, vocab.SpecialID("bos"), vocab.SpecialID("eos"))
			}

			msgs := []Message{{Role: "system", Content: realSystem}, {Role: "user", Content: realUser}}
			prompt, err := m.ApplyChatTemplate(msgs, true)
			if err != nil {
				t.Fatal(err)
			}
			rendered := []string{prompt}
			for _, p := range rendered {
				for _, want := range append([]string{realSystem, realUser}, f.markers...) {
					if !strings.Contains(p, want) {
						t.Errorf("rendered prompt lacks %q:\n%s", want, p)
					}
				}
			}
			ids := tokenize(t, m, prompt)
			for _, s := range f.special {
				id := vocab.ID(s)
				if id < 0 {
					t.Fatalf("%q is not a token of %s", s, f.vocab)
				}
				if !slices.Contains(ids, int32(id)) {
					t.Errorf("prompt tokens lack %q (id %d): %v", s, id, ids)
				}
			}
			back, err := m.Detokenize(ids, true)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(back, realUser) {
				t.Errorf("detokenized prompt lacks the user text: %q", back)
			}

			r := generate(t, m, Request{Prompt: ids, MaxTokens: 4})
			if r.final.Finish != FinishLength || len(r.tokens) != 4 || r.text == "" {
				t.Fatalf("greedy: finish %s after %d tokens, text %q; want length after 4 with text", r.final.Finish, len(r.tokens), r.text)
			}
			again := generate(t, m, Request{Prompt: ids, MaxTokens: 4})
			if !slices.Equal(again.tokens, r.tokens) {
				t.Errorf("two greedy runs differ: %v, %v", r.tokens, again.tokens)
			}
			t.Logf("%d vocab, prompt %d tokens, generated %q", info.VocabSize, len(ids), r.text)
		})
	}
}
