package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Wire types of the OpenAI chat and completions APIs, as modeld accepts and
// returns them. Fields modeld does not support are decoded so that a request
// using them gets a clear 400 instead of being silently ignored.

// StringOrList decodes a JSON string or an array of strings (stop, input).
type StringOrList []string

func (s *StringOrList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("want a string or an array of strings")
	}
	*s = many
	return nil
}

// KeepAlive decodes a duration string ("5m", "0", "-1") or a number of seconds.
type KeepAlive struct{ D *time.Duration }

func (k *KeepAlive) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err == nil {
		d := time.Duration(secs * float64(time.Second))
		k.D = &d
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"5m\" or a number of seconds")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		var n float64
		if _, serr := fmt.Sscan(s, &n); serr != nil {
			return fmt.Errorf("want a duration such as \"5m\" or a number of seconds")
		}
		d = time.Duration(n * float64(time.Second))
	}
	k.D = &d
	return nil
}

// MessageContent is a message's content: a string, or an array of parts of which
// modeld reads the text parts.
type MessageContent struct {
	Text     string
	NonText  []string // types of parts modeld cannot read (image_url, input_audio, ...)
	Null     bool
	provided bool
}

func (m *MessageContent) UnmarshalJSON(b []byte) error {
	m.provided = true
	if string(b) == "null" {
		m.Null = true
		return nil
	}
	if err := json.Unmarshal(b, &m.Text); err == nil {
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return fmt.Errorf("content must be a string or an array of content parts")
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			sb.WriteString(p.Text)
		} else {
			m.NonText = append(m.NonText, p.Type)
		}
	}
	m.Text = sb.String()
	return nil
}

type ChatMessage struct {
	Role       string          `json:"role"`
	Content    MessageContent  `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// samplingFields are shared by chat and completions requests.
type samplingFields struct {
	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	TopK             *int               `json:"top_k"`
	MinP             *float64           `json:"min_p"`
	RepeatPenalty    *float64           `json:"repeat_penalty"`
	Seed             *int64             `json:"seed"`
	Stop             StringOrList       `json:"stop"`
	MaxTokens        *int               `json:"max_tokens"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
	N                *int               `json:"n"`
	Stream           bool               `json:"stream"`
	StreamOptions    *StreamOptions     `json:"stream_options"`
	Logprobs         json.RawMessage    `json:"logprobs"`
	TopLogprobs      *int               `json:"top_logprobs"`
	User             string             `json:"user"`
	KeepAlive        KeepAlive          `json:"keep_alive"`
}

type ChatCompletionRequest struct {
	Model               string        `json:"model"`
	Messages            []ChatMessage `json:"messages"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	samplingFields
	Tools          json.RawMessage `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

type CompletionRequest struct {
	Model  string          `json:"model"`
	Prompt json.RawMessage `json:"prompt"`
	Echo   bool            `json:"echo"`
	Suffix *string         `json:"suffix"`
	BestOf *int            `json:"best_of"`
	samplingFields
}

type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

type AssistantMessage struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
	Refusal *string `json:"refusal"`
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
	Usage             Usage        `json:"usage"`
}

type ChunkDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
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
	Usage             *Usage        `json:"usage,omitempty"`
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
	Usage             *Usage             `json:"usage,omitempty"`
}
