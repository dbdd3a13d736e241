package main

import (
	"strings"
	"testing"
)

// TestDialectsAgree sends one conversation (a system prompt and a user
// turn) through the four chat dialects — OpenAI chat completions, Ollama's
// /api/chat, Anthropic Messages and OpenAI Responses — with greedy sampling,
// to a random-weight model with Qwen2.5's real vocabulary and template: the
// dialects are translations onto one request model, so the text, the prompt
// tokens and the completion tokens are the same in all four.
func TestDialectsAgree(t *testing.T) {
	_, base := realDaemon(t, []realModel{qwenModel}, "--context-size", "1024")
	const system, user, n = "You are terse.", "Name three rivers of Europe.", 12
	type answer struct {
		text               string
		prompt, completion int
	}
	got := map[string]answer{}

	var oa struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	callOK(t, base, "/v1/chat/completions", map[string]any{"model": "t/qwen", "max_tokens": n, "temperature": 0,
		"messages": []map[string]any{{"role": "system", "content": system}, {"role": "user", "content": user}}}, &oa)
	if len(oa.Choices) != 1 {
		t.Fatalf("openai: %+v", oa)
	}
	got["openai"] = answer{oa.Choices[0].Message.Content, oa.Usage.PromptTokens, oa.Usage.CompletionTokens}

	var ol struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		PromptEvalCount int `json:"prompt_eval_count"`
		EvalCount       int `json:"eval_count"`
	}
	callOK(t, base, "/api/chat", map[string]any{"model": "t/qwen", "stream": false, "options": map[string]any{"temperature": 0, "num_predict": n},
		"messages": []map[string]any{{"role": "system", "content": system}, {"role": "user", "content": user}}}, &ol)
	got["ollama"] = answer{ol.Message.Content, ol.PromptEvalCount, ol.EvalCount}

	var an struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Usage struct {
			InputTokens          int `json:"input_tokens"`
			CacheReadInputTokens int `json:"cache_read_input_tokens"`
			CacheCreationTokens  int `json:"cache_creation_input_tokens"`
			OutputTokens         int `json:"output_tokens"`
		} `json:"usage"`
	}
	callOK(t, base, "/v1/messages", map[string]any{"model": "t/qwen", "max_tokens": n, "temperature": 0, "system": system,
		"messages": []map[string]any{{"role": "user", "content": user}}}, &an)
	var text strings.Builder
	for _, b := range an.Content {
		if b.Type == "text" {
			text.WriteString(b.Text)
		}
	}
	// Anthropic's input_tokens leaves out the tokens read from the prompt cache.
	got["anthropic"] = answer{text.String(), an.Usage.InputTokens + an.Usage.CacheReadInputTokens + an.Usage.CacheCreationTokens, an.Usage.OutputTokens}

	var rs struct {
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	callOK(t, base, "/v1/responses", map[string]any{"model": "t/qwen", "max_output_tokens": n, "temperature": 0, "instructions": system,
		"input": user}, &rs)
	text.Reset()
	for _, item := range rs.Output {
		for _, c := range item.Content {
			if item.Type == "message" && c.Type == "output_text" {
				text.WriteString(c.Text)
			}
		}
	}
	got["responses"] = answer{text.String(), rs.Usage.InputTokens, rs.Usage.OutputTokens}

	want := got["openai"]
	if want.prompt == 0 || want.completion == 0 {
		t.Fatalf("openai answer %+v has no usage", want)
	}
	for dialect, a := range got {
		if a != want {
			t.Errorf("%s: %+v; openai chat: %+v", dialect, a, want)
		}
	}
	t.Logf("all four dialects: %q, %d prompt and %d completion tokens", want.text, want.prompt, want.completion)
}
