package main

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestToolsAgainstDaemon: a chat request with tools and a conversation
// holding an assistant's tool call and the tool's result runs through the
// daemon and the runner on a model with Qwen2.5's real vocabulary and
// (Hermes-format) template: the template renders the tools (the prompt is
// longer than with tool_choice none, which renders none), the prompt is
// the one /v1/tokenize counts, and streaming with tools ends cleanly.
func TestToolsAgainstDaemon(t *testing.T) {
	_, base := realDaemon(t, []realModel{qwenModel}, "--context-size", "2048")
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "get_weather", "description": "Weather of a city",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}
	msgs := []map[string]any{
		{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": "call_1", "type": "function",
			"function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris"}`}}}},
		{"role": "tool", "tool_call_id": "call_1", "content": `{"temp_c": 21}`},
	}
	type usage struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	var with, none usage
	post(t, base, "/v1/chat/completions", map[string]any{"model": "t/qwen", "messages": msgs, "tools": tools, "max_tokens": 4, "temperature": 0}, 200, &with)
	post(t, base, "/v1/chat/completions", map[string]any{"model": "t/qwen", "messages": msgs, "tools": tools, "tool_choice": "none", "max_tokens": 4, "temperature": 0}, 200, &none)
	counted := tokenizeIDs(t, base, map[string]any{"model": "t/qwen", "messages": msgs, "tools": tools})
	plain := tokenizeIDs(t, base, map[string]any{"model": "t/qwen", "messages": msgs})
	if with.Usage.PromptTokens != len(counted) || none.Usage.PromptTokens != len(plain) || len(counted) <= len(plain) {
		t.Errorf("prompt tokens: %d with tools (tokenize %d), %d with tool_choice none (tokenize without tools %d); want equal pairs, tools longer",
			with.Usage.PromptTokens, len(counted), none.Usage.PromptTokens, len(plain))
	}
	switch f := with.Choices[0].FinishReason; f {
	case "stop", "length", "tool_calls":
	default:
		t.Errorf("finish_reason %q", f)
	}

	params := openai.ChatCompletionNewParams{
		Model:    "t/qwen",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object"}})},
		MaxTokens: openai.Int(6), Temperature: openai.Float(0),
	}
	client := sdk(base)
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].FinishReason == "" {
		t.Errorf("streamed = %+v", acc.Choices)
	}
}
