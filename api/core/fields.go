package core

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/duration"
)

// The request fields every dialect shares: the sampling fields and their
// checks (SamplingFields.request), keep_alive, stop lists, and the
// function-tool shapes that OpenAI and Ollama both send.

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
			return BadRequest("keep_alive", "invalid keep_alive: %v; want %s", err, keepAliveForms)
		}
	} else if len(b) > 0 && b[0] != '-' && (b[0] < '0' || b[0] > '9') {
		return BadRequest("keep_alive", "invalid keep_alive %s: want %s", Clip(string(b)), keepAliveForms)
	}
	d, err := duration.Parse(text)
	if err != nil {
		return BadRequest("keep_alive", "invalid keep_alive %s: %v; want %s", Quote(text), err, keepAliveForms)
	}
	k.D = &d
	return nil
}

// WireFunction is a function's name and arguments (JSON text).
type WireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// SamplingFields are shared by chat and completions requests.
type SamplingFields struct {
	// MaxTemperature is the dialect's upper bound of temperature (0: 2,
	// OpenAI's; Anthropic's is 1).
	MaxTemperature   float64            `json:"-"`
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
	// Speculative is modeld's own: prompt-lookup decoding on (true) or off
	// (false) for this request; absent keeps the model's setting.
	Speculative *bool `json:"speculative"`
}

// WireTool is a tool definition of the chat API.
type WireTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      bool            `json:"strict"`
	} `json:"function"`
}

// WireToolCall is a tool call of an assistant message.
type WireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Given reports whether a raw field was sent and is not null.
func Given(b json.RawMessage) bool { return len(b) > 0 && string(b) != "null" }

func validToolName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Request validates the shared sampling fields and returns the engine
// request. maxParam names the field maxTokens came from; ContextCap is the
// largest context any model gets, which a completion budget must leave room in.
func (f *SamplingFields) Request(maxParam string, maxTokens *int, contextCap int) (backends.Request, error) {
	var errs []error
	bad := func(param, format string, args ...any) { errs = append(errs, BadRequest(param, format, args...)) }
	r := backends.Request{Stop: f.Stop, Speculative: f.Speculative}
	s := &r.Sampling
	s.Temperature = 1 // OpenAI's default
	if t := f.Temperature; t != nil {
		top := cmp.Or(f.MaxTemperature, 2)
		if *t < 0 || *t > top {
			bad("temperature", "temperature %g is outside [0, %g]", *t, top)
		}
		s.Temperature = float32(*t)
	}
	if p := f.TopP; p != nil {
		if *p < 0 || *p > 1 {
			bad("top_p", "top_p %g is outside [0, 1]", *p)
		}
		s.TopP = float32(*p)
	}
	if k := f.TopK; k != nil {
		if *k < 0 {
			bad("top_k", "top_k %d is negative", *k)
		}
		s.TopK = *k
	}
	if p := f.MinP; p != nil {
		if *p < 0 || *p > 1 {
			bad("min_p", "min_p %g is outside [0, 1]", *p)
		}
		s.MinP = float32(*p)
	}
	if p := f.RepeatPenalty; p != nil {
		if *p < 0 {
			bad("repeat_penalty", "repeat_penalty %g is negative", *p)
		}
		s.RepeatPenalty = float32(*p)
	}
	for _, pen := range []struct {
		name string
		p    *float64
	}{{"presence_penalty", f.PresencePenalty}, {"frequency_penalty", f.FrequencyPenalty}} {
		if pen.p != nil && (*pen.p < -2 || *pen.p > 2) {
			bad(pen.name, "%s %g is outside [-2, 2]", pen.name, *pen.p)
		}
	}
	if f.PresencePenalty != nil {
		s.PresencePenalty = float32(*f.PresencePenalty)
	}
	if f.FrequencyPenalty != nil {
		s.FrequencyPenalty = float32(*f.FrequencyPenalty)
	}
	s.Seed = f.Seed
	if n := len(f.LogitBias); n > MaxLogitBias {
		errs = append(errs, TooMany("logit_bias", n, MaxLogitBias, "entries"))
	} else if n > 0 {
		s.LogitBias = map[int32]float32{}
		for k, v := range f.LogitBias {
			id, err := strconv.ParseInt(k, 10, 32)
			if err != nil || id < 0 {
				bad("logit_bias", "logit_bias key %s is not a token id", Quote(k))
				continue
			}
			if v < -100 || v > 100 {
				bad("logit_bias", "logit_bias for token %s is %g, outside [-100, 100]", k, v)
			}
			s.LogitBias[int32(id)] = float32(v)
		}
	}
	if n := len(f.Stop); n > MaxStopSequences {
		errs = append(errs, TooMany("stop", n, MaxStopSequences, "sequences"))
	} else {
		for i, st := range f.Stop {
			switch {
			case st == "":
				bad("stop", "stop sequences must not be empty")
			case len(st) > MaxStopBytes:
				bad("stop", "stop[%d] has %d bytes, more than the %d allowed", i, len(st), MaxStopBytes)
			}
		}
	}
	if maxTokens != nil {
		if *maxTokens < 1 {
			bad(maxParam, "%s must be at least 1, got %d", maxParam, *maxTokens)
		} else if err := checkMaxTokens(maxParam, *maxTokens, contextCap); err != nil {
			errs = append(errs, err)
		}
		r.MaxTokens = *maxTokens
	}
	if f.N != nil {
		if *f.N < 1 || *f.N > MaxChoices {
			bad("n", "n %d is outside [1, %d]", *f.N, MaxChoices)
		}
		r.N = *f.N
	}
	switch lp := string(f.Logprobs); lp {
	case "", "null", "false":
	case "true":
		r.Logprobs = true
	default:
		bad("logprobs", "logprobs must be true or false")
	}
	if k := f.TopLogprobs; k != nil {
		if *k < 0 || *k > MaxTopLogprobs {
			bad("top_logprobs", "top_logprobs %d is outside [0, %d]", *k, MaxTopLogprobs)
		}
		r.TopLogprobs = *k
		if *k > 0 && !r.Logprobs {
			bad("top_logprobs", "top_logprobs needs logprobs: true")
		}
	}
	if f.StreamOptions != nil && !f.Stream {
		bad("stream_options", "stream_options is only allowed with stream: true")
	}
	return r, JoinBadRequests(errs)
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
