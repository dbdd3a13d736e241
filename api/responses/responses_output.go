package responses

import (
	"encoding/json"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/modeld/modeld/api/core"
)

// The Responses answer: the response object, its output items, and the
// event stream that builds them. One builder turns a generation's events
// into output items for both forms, so a streamed response ends as the
// same object as the one returned whole.

// Response is the Responses API's response object.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Background         bool               `json:"background"`
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []any              `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          ResponseReasoning  `json:"reasoning"`
	ServiceTier        string             `json:"service_tier"`
	Store              bool               `json:"store"`
	Temperature        float64            `json:"temperature"`
	Text               responsesText      `json:"text"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              json.RawMessage    `json:"tools"`
	TopP               float64            `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *ResponseUsage     `json:"usage"`
	User               *string            `json:"user"`
	Metadata           map[string]string  `json:"metadata"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

// ResponseUsage is a response's token counts.
type ResponseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// OutputText is an output_text content part (input_text in input_items).
type OutputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs,omitempty"`
}

type MessageItem struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []OutputText `json:"content"`
}

type functionCallItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// customToolCallItem is a call of a custom (freeform) tool: its input text.
type customToolCallItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Input     string `json:"input"`
	Status    string `json:"status"`
}

// toolSearchCallItem is a call of the client's tool search: its arguments
// as a JSON value.
type toolSearchCallItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	CallID    string          `json:"call_id"`
	Execution string          `json:"execution"`
	Arguments json.RawMessage `json:"arguments"`
	Status    string          `json:"status"`
}

type reasoningPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type reasoningItem struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Summary []reasoningPart `json:"summary"`
	Content []reasoningPart `json:"content"`
	Status  string          `json:"status"`
}

// responseWriter builds one response from a generation's events, and
// streams it when the request asked for a stream.
type responseWriter struct {
	c        *gin.Context
	finished bool // the final event came and was answered
	resp     Response
	plan     *ResponsePlan
	summary  bool // reasoning.summary asked: the summary is the reasoning text
	sse      *core.SseWriter
	seq      int

	// the item being built: its kind and index in resp.Output
	open      string // "", "reasoning", "message", "call"
	openIndex int
	text      string // the open item's text or arguments
	callIndex int    // the backend's index of the open call
	calls     map[int]int
	args      map[int]string // each call's arguments as generated, by output index
	sent      map[int]int    // a custom call's input bytes already streamed, by output index
}

func newResponseWriter(c *gin.Context, req *ResponsesRequest, plan *ResponsePlan) *responseWriter {
	r := Response{
		ID: core.NewID("resp_"), Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
		Instructions: req.Instructions, MaxOutputTokens: req.MaxOutputTokens, Model: req.Model, Output: []any{},
		ParallelToolCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls, ServiceTier: "default",
		Store: req.Store == nil || *req.Store, Temperature: 1, TopP: 1, Truncation: "disabled",
		Text: responsesText{Format: &responsesTextFormat{Type: "text"}}, ToolChoice: json.RawMessage(`"auto"`),
		Tools: json.RawMessage(`[]`), Metadata: req.Metadata,
	}
	if r.Metadata == nil {
		r.Metadata = map[string]string{}
	}
	if req.PreviousResponseID != "" {
		r.PreviousResponseID = &req.PreviousResponseID
	}
	if req.Reasoning != nil {
		r.Reasoning = *req.Reasoning
	}
	if req.Temperature != nil {
		r.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		r.TopP = *req.TopP
	}
	if req.Text != nil && req.Text.Format != nil {
		r.Text = *req.Text
	} else if req.Text != nil {
		r.Text.Verbosity = req.Text.Verbosity
	}
	if core.Given(req.ToolChoice) {
		r.ToolChoice = req.ToolChoice
	}
	if core.Given(req.Tools) {
		r.Tools = req.Tools
	}
	if req.User != "" {
		r.User = &req.User
	}
	w := &responseWriter{c: c, resp: r, plan: plan, calls: map[int]int{}, args: map[int]string{}, sent: map[int]int{}}
	w.summary = req.Reasoning != nil && req.Reasoning.Summary != nil && *req.Reasoning.Summary != ""
	if req.Stream {
		w.sse = core.NewSSE(c)
	}
	return w
}

// event sends one stream event (nothing for a response returned whole).
func (w *responseWriter) event(typ string, fields gin.H) {
	if w.sse == nil {
		return
	}
	fields["type"] = typ
	fields["sequence_number"] = w.seq
	w.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		b, _ = json.Marshal(gin.H{"type": "error", "message": err.Error(), "sequence_number": w.seq})
	}
	w.sse.Start()
	_, _ = w.c.Writer.Write([]byte("event: " + typ + "\ndata: "))
	_, _ = w.c.Writer.Write(append(b, '\n', '\n'))
	w.c.Writer.Flush()
}

// snapshot is the response as an event carries it.
func (w *responseWriter) snapshot() Response {
	r := w.resp
	r.Output = append([]any{}, w.resp.Output...)
	return r
}
