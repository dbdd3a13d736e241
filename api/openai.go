package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/duration"
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

// KeepAlive decodes keep_alive with the configuration's own duration parser
// (internal/duration): a duration string ("5m", "0", "-1") or a number of
// seconds (300, "300"). Anything else ("10 minutes", 1e3, true) is a 400
// naming keep_alive.
type KeepAlive struct{ D *time.Duration }

func (k *KeepAlive) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	text := string(b) // a JSON number, read as its digits
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &text); err != nil {
			return badRequest("keep_alive", "invalid keep_alive: %v", err)
		}
	} else if len(b) > 0 && b[0] != '-' && (b[0] < '0' || b[0] > '9') {
		return badRequest("keep_alive", "invalid keep_alive: %s", duration.ErrSyntax)
	}
	d, err := duration.Parse(text)
	if err != nil {
		return badRequest("keep_alive", "invalid keep_alive %s: %v", quote(text), err)
	}
	k.D = &d
	return nil
}

// MessageContent is a message's content: a string, or an array of parts of which
// modeld reads the text parts.
type MessageContent struct {
	Text    string
	NonText []string // types of parts modeld cannot read (image_url, input_audio, ...)
	// Parts are the typed parts when content was an array.
	Parts    []backends.ContentPart
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
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
		InputAudio *struct {
			Data   []byte `json:"data"`
			Format string `json:"format"`
		} `json:"input_audio"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return fmt.Errorf("content must be a string or an array of content parts")
	}
	var sb strings.Builder
	for _, p := range parts {
		part := backends.ContentPart{WireType: p.Type}
		switch p.Type {
		case "text":
			sb.WriteString(p.Text)
			part.Type, part.Text = backends.PartText, p.Text
		case "image_url":
			part.Type = backends.PartImage
			if p.ImageURL != nil {
				part.URL = p.ImageURL.URL
			}
			m.NonText = append(m.NonText, p.Type)
		case "input_audio":
			part.Type = backends.PartAudio
			if p.InputAudio != nil {
				part.Data, part.Format = p.InputAudio.Data, p.InputAudio.Format
			}
			m.NonText = append(m.NonText, p.Type)
		default:
			m.NonText = append(m.NonText, p.Type)
			continue
		}
		m.Parts = append(m.Parts, part)
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
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// wireTool is a tool definition of the chat API.
type wireTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      bool            `json:"strict"`
	} `json:"function"`
}

// wireToolCall is a tool call of an assistant message.
type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// message turns the i-th message into the internal model.
func (m *ChatMessage) message(i int) (backends.Message, error) {
	role := m.Role
	if role == "developer" {
		role = "system"
	}
	bm := backends.Message{Role: role, Content: m.Content.Text, Parts: m.Content.Parts, Name: m.Name, ToolCallID: m.ToolCallID}
	if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" {
		var calls []wireToolCall
		if err := json.Unmarshal(m.ToolCalls, &calls); err != nil {
			param := fmt.Sprintf("messages[%d].tool_calls", i)
			return bm, badRequest(param, "%s must be an array of {id, type: \"function\", function: {name, arguments}}", param)
		}
		for _, c := range calls {
			bm.ToolCalls = append(bm.ToolCalls, backends.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
	}
	return bm, nil
}

// tooling reads tools, tool_choice and response_format into gen. They are
// checked for shape here; whether the model can honour them is the
// backend's to say.
func (req *ChatCompletionRequest) tooling(gen *backends.Request) error {
	var errs []error
	if len(req.Tools) > 0 && string(req.Tools) != "null" {
		var tools []wireTool
		if err := json.Unmarshal(req.Tools, &tools); err != nil {
			errs = append(errs, badRequest("tools", "tools must be an array of {type: \"function\", function: {name, ...}}"))
		} else if len(tools) > MaxTools {
			errs = append(errs, tooMany("tools", len(tools), MaxTools, "tools"))
		} else {
			for i, t := range tools {
				if t.Type != "function" || t.Function == nil || t.Function.Name == "" {
					errs = append(errs, badRequest(fmt.Sprintf("tools[%d]", i), "tools[%d] must be {type: \"function\", function: {name, ...}}", i))
					continue
				}
				gen.Tools = append(gen.Tools, backends.Tool{Name: t.Function.Name, Description: t.Function.Description,
					Parameters: t.Function.Parameters, Strict: t.Function.Strict})
			}
		}
	}
	if len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null" {
		var mode string
		var named struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		switch {
		case json.Unmarshal(req.ToolChoice, &mode) == nil:
			switch backends.ToolChoiceMode(mode) {
			case backends.ToolChoiceAuto, backends.ToolChoiceNone, backends.ToolChoiceRequired:
				gen.ToolChoice.Mode = backends.ToolChoiceMode(mode)
			default:
				errs = append(errs, badRequest("tool_choice", "tool_choice %s is not one of auto, none, required", quote(mode)))
			}
		case json.Unmarshal(req.ToolChoice, &named) == nil && named.Type == "function" && named.Function.Name != "":
			gen.ToolChoice = backends.ToolChoice{Mode: backends.ToolChoiceFunction, Name: named.Function.Name}
		default:
			errs = append(errs, badRequest("tool_choice", "tool_choice must be auto, none, required or {type: \"function\", function: {name}}"))
		}
	}
	if rf := req.ResponseFormat; rf != nil {
		switch t := backends.ResponseFormatType(rf.Type); t {
		case "", backends.FormatText, backends.FormatJSONObject:
			gen.ResponseFormat.Type = t
		case backends.FormatJSONSchema:
			if rf.JSONSchema == nil {
				errs = append(errs, badRequest("response_format", "response_format json_schema needs a json_schema object"))
				break
			}
			gen.ResponseFormat = backends.ResponseFormat{Type: t, Name: rf.JSONSchema.Name, Schema: rf.JSONSchema.Schema, Strict: rf.JSONSchema.Strict}
		default:
			errs = append(errs, badRequest("response_format", "response_format type %s is not one of text, json_object, json_schema", quote(rf.Type)))
		}
	}
	return joinBadRequests(errs)
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
