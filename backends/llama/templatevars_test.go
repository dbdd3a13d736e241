package llama

import (
	"context"
	"slices"
	"testing"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/testenv"
)

// TestRunnerTemplateVars: the template variables a context carries reach
// the runner's chat rendering: with Qwen3's real template (qwen2
// vocabulary), enable_thinking false gives the template's closed, empty
// thinking block, a prompt that differs from the default.
func TestRunnerTemplateVars(t *testing.T) {
	initLib(t)
	path := testenv.LlamaChatModel(t, "qwen2", "Qwen-Qwen3-0.6B")
	r := startRunner(t, path, Options{Slots: 1, ContextSize: 512})
	msgs := []Message{{Role: "user", Content: "Name one prime number."}}
	off := backends.WithTemplateVars(context.Background(), map[string]any{"enable_thinking": false})
	def, err := r.ChatPromptContext(context.Background(), msgs, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.ChatPromptContext(off, msgs, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	text, err := r.Detokenize(got, true)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>user\nName one prime number.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	if text != want || slices.Equal(got, def) {
		t.Errorf("runner prompt with enable_thinking false = %q, want %q (default ids %v)", text, want, def)
	}
}
