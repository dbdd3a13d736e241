package models

import "testing"

func TestQuantizedName(t *testing.T) {
	for in, want := range map[string]string{
		"bench.gguf":                      "bench-Q4_K_M.gguf",
		"Qwen2.5-0.5B-Instruct-F16.gguf":  "Qwen2.5-0.5B-Instruct-Q4_K_M.gguf",
		"model.f32.gguf":                  "model-Q4_K_M.gguf",
		"Llama-3.2-1B-Instruct-BF16.GGUF": "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
	} {
		if got := quantizedName(in, "Q4_K_M"); got != want {
			t.Errorf("quantizedName(%q) = %q, want %q", in, got, want)
		}
	}
}
