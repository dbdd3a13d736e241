package openai

import (
	"encoding/json"
	"github.com/modeld/modeld/api/core"
)

// The OpenAI wire types of completions requests and of the chat and
// completions answers.

// CompletionRequest is a /v1/completions request.
type CompletionRequest struct {
	Model  string          `json:"model"`
	Prompt json.RawMessage `json:"prompt"`
	Echo   bool            `json:"echo"`
	Suffix *string         `json:"suffix"`
	BestOf *int            `json:"best_of"`
	core.SamplingFields
	ResponseFormat *core.WireResponseFormat `json:"response_format"`
}

type AssistantMessage struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
	// ReasoningContent is a reasoning model's thinking block, kept out of
	// Content.
	ReasoningContent string              `json:"reasoning_content,omitempty"`
	Refusal          *string             `json:"refusal"`
	ToolCalls        []core.WireToolCall `json:"tool_calls,omitempty"`
}

type ChatChoice struct {
	Index        int              `json:"index"`
	Message      AssistantMessage `json:"message"`
	Logprobs     any              `json:"logprobs"`
	FinishReason string           `json:"finish_reason"`
}

type ChatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []ChatChoice `json:"choices"`
	Usage             core.Usage   `json:"usage"`
}

type ChunkDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ToolCalls        []ChunkToolCall `json:"tool_calls,omitempty"`
}

// ChunkToolCall is a piece of a tool call in a stream: the first piece of
// a call has its id, type and name; later ones add argument text.
type ChunkToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type ChunkChoice struct {
	Index        int        `json:"index"`
	Delta        ChunkDelta `json:"delta"`
	Logprobs     any        `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type ChatCompletionChunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint"`
	Choices           []ChunkChoice `json:"choices"`
	Usage             *core.Usage   `json:"usage,omitempty"`
}

type CompletionChoice struct {
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type Completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []CompletionChoice `json:"choices"`
	Usage             *core.Usage        `json:"usage,omitempty"`
}
