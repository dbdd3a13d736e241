package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestLogprobsAndChoicesAgainstDaemon drives a real daemon (runner process,
// llama.cpp) with openai-go: greedy n=2 with logprobs gives two choices,
// indexed, with the same text and logprobs whose top alternative is the
// chosen token; the streamed answer reassembles to the same per index; n
// above the model's slots is a 400 on n naming both; the completions
// endpoint gives its own logprobs shape for the legacy integer form.
func TestLogprobsAndChoicesAgainstDaemon(t *testing.T) {
	_, base, logs := startDaemon(t, chatHome(t), "--context-size", "1024")
	client := sdk(base)
	ctx := context.Background()

	p := chatParams("t/chat", 8)
	p.Logprobs, p.TopLogprobs, p.N = openai.Bool(true), openai.Int(3), openai.Int(2)
	full, err := client.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, logs)
	}
	if len(full.Choices) != 2 {
		t.Fatalf("%d choices, want 2", len(full.Choices))
	}
	total := 0
	for i, c := range full.Choices {
		if c.Index != int64(i) {
			t.Errorf("choice %d has index %d", i, c.Index)
		}
		content := c.Logprobs.Content
		if len(content) == 0 || len(content) > 8 || c.FinishReason == "length" && len(content) != 8 {
			t.Fatalf("choice %d: %d logprobs entries, finish %s", i, len(content), c.FinishReason)
		}
		for k, e := range content {
			if len(e.TopLogprobs) != 3 || e.TopLogprobs[0].Token != e.Token || e.TopLogprobs[0].Logprob != e.Logprob ||
				e.Logprob > 0 || e.TopLogprobs[1].Logprob > e.TopLogprobs[0].Logprob || e.TopLogprobs[2].Logprob > e.TopLogprobs[1].Logprob {
				t.Errorf("choice %d token %d: %+v", i, k, e)
			}
			if string(bytesOf(e.Bytes)) != e.Token && !strings.ContainsRune(e.Token, '\uFFFD') {
				t.Errorf("choice %d token %d: bytes %v are not %q", i, k, e.Bytes, e.Token)
			}
		}
		total += len(content)
	}
	if full.Choices[0].Message.Content != full.Choices[1].Message.Content {
		t.Errorf("greedy choices differ: %q and %q", full.Choices[0].Message.Content, full.Choices[1].Message.Content)
	}
	if full.Usage.CompletionTokens < int64(total) || full.Usage.CompletionTokens > int64(total+2) {
		t.Errorf("usage %d completion tokens for %d logprobs entries", full.Usage.CompletionTokens, total)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, p)
	texts := make([]string, 2)
	entries := make([]int, 2)
	finishes := 0
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			if c.Index < 0 || c.Index > 1 {
				t.Fatalf("chunk of choice %d", c.Index)
			}
			texts[c.Index] += c.Delta.Content
			entries[c.Index] += len(c.Logprobs.Content)
			if c.FinishReason != "" {
				finishes++
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v\n%s", err, logs)
	}
	for i := range texts {
		if texts[i] != full.Choices[i].Message.Content || entries[i] != len(full.Choices[i].Logprobs.Content) {
			t.Errorf("streamed choice %d: %q with %d logprobs, not %q with %d", i, texts[i], entries[i],
				full.Choices[i].Message.Content, len(full.Choices[i].Logprobs.Content))
		}
	}
	if finishes != 2 {
		t.Errorf("%d finish chunks, want 2", finishes)
	}

	over := chatParams("t/chat", 4)
	over.N = openai.Int(5)
	_, err = client.Chat.Completions.New(ctx, over)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "n" || !strings.Contains(apiErr.Message, "n 5") || !strings.Contains(apiErr.Message, "4 slots") {
		t.Fatalf("n 5 on 4 slots: %v", err)
	}

	comp, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model:     "t/raw",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(6), Temperature: openai.Float(0), Logprobs: openai.Int(2),
	})
	if err != nil {
		t.Fatalf("completion: %v\n%s", err, logs)
	}
	lp := comp.Choices[0].Logprobs
	if n := len(lp.Tokens); n == 0 || len(lp.TokenLogprobs) != n || len(lp.TopLogprobs) != n || len(lp.TextOffset) != n {
		t.Fatalf("completion logprobs %+v", lp)
	}
	for k, top := range lp.TopLogprobs {
		if len(top) == 0 || len(top) > 2 || top[lp.Tokens[k]] != lp.TokenLogprobs[k] {
			t.Errorf("token %d %q (%g): top %v", k, lp.Tokens[k], lp.TokenLogprobs[k], top)
		}
	}
}

func bytesOf(v []int64) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}
