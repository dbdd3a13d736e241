package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/backends"
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

// outputText is an output_text content part (input_text in input_items).
type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs,omitempty"`
}

type messageItem struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
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
	c       *gin.Context
	resp    Response
	plan    *responsePlan
	summary bool // reasoning.summary asked: the summary is the reasoning text
	sse     *sseWriter
	seq     int

	// the item being built: its kind and index in resp.Output
	open      string // "", "reasoning", "message", "call"
	openIndex int
	text      string // the open item's text or arguments
	callIndex int    // the backend's index of the open call
	calls     map[int]int
	args      map[int]string // each call's arguments as generated, by output index
	sent      map[int]int    // a custom call's input bytes already streamed, by output index
}

func newResponseWriter(c *gin.Context, req *ResponsesRequest, plan *responsePlan) *responseWriter {
	r := Response{
		ID: newID("resp_"), Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
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
	if given(req.ToolChoice) {
		r.ToolChoice = req.ToolChoice
	}
	if given(req.Tools) {
		r.Tools = req.Tools
	}
	if req.User != "" {
		r.User = &req.User
	}
	w := &responseWriter{c: c, resp: r, plan: plan, calls: map[int]int{}, args: map[int]string{}, sent: map[int]int{}}
	w.summary = req.Reasoning != nil && req.Reasoning.Summary != nil && *req.Reasoning.Summary != ""
	if req.Stream {
		w.sse = newSSE(c)
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
	w.sse.start()
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

// write reads the generation to its end and answers. It returns the final
// response and whether it completed (or stopped incomplete) so that it
// may be stored.
func (w *responseWriter) write(events <-chan backends.Event) (*Response, bool) {
	w.event("response.created", gin.H{"response": w.snapshot()})
	w.event("response.in_progress", gin.H{"response": w.snapshot()})
	for ev := range events {
		if ev.Reasoning != "" {
			w.deltaReasoning(ev.Reasoning)
		}
		if ev.Text != "" {
			w.deltaText(ev.Text)
		}
		for _, d := range ev.ToolCalls {
			w.deltaCall(d)
		}
		if !ev.Done {
			continue
		}
		switch {
		case ev.Finish == backends.FinishCancelled:
			if w.sse == nil {
				writeCut(w.c, nil)
			} else if cut := shutdownCause(w.c.Request.Context()); cut != nil && w.sse.started {
				w.fail(cut)
			}
			return nil, false
		case generationError(ev) != nil:
			if w.sse == nil {
				writeError(w.c, generationError(ev))
			} else {
				w.fail(generationError(ev))
			}
			return nil, false
		}
		status := "completed"
		if ev.Finish == backends.FinishLength {
			status = "incomplete"
			w.resp.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
		}
		w.close(status)
		w.resp.Status = status
		u := &ResponseUsage{InputTokens: ev.Usage.PromptTokens, OutputTokens: ev.Usage.CompletionTokens,
			TotalTokens: ev.Usage.PromptTokens + ev.Usage.CompletionTokens}
		u.InputTokensDetails.CachedTokens = ev.Usage.CachedTokens
		u.OutputTokensDetails.ReasoningTokens = min(ev.Usage.ReasoningTokens, ev.Usage.CompletionTokens)
		w.resp.Usage = u
		if w.sse == nil {
			w.c.JSON(http.StatusOK, w.resp)
		} else {
			w.event("response."+status, gin.H{"response": w.snapshot()})
		}
		return &w.resp, true
	}
	// The events ended without a last event: the backend broke its contract.
	err := errors.New("generation ended without a final event")
	if w.sse == nil {
		writeError(w.c, err)
	} else {
		w.fail(err)
	}
	return nil, false
}

// fail ends a stream with an error event and response.failed.
func (w *responseWriter) fail(err error) {
	e := toAPIError(asCut(w.c, err))
	code, _ := e.Code.(string)
	if code == "" {
		code = e.Type
	}
	w.close("incomplete")
	w.event("error", gin.H{"code": code, "message": e.Message, "param": e.Param})
	w.resp.Status = "failed"
	w.resp.Error = &responseError{Code: code, Message: e.Message}
	w.event("response.failed", gin.H{"response": w.snapshot()})
}

// begin opens a new output item of kind, closing the open one.
func (w *responseWriter) begin(kind string, item any) {
	w.close("completed")
	w.open, w.openIndex, w.text = kind, len(w.resp.Output), ""
	w.resp.Output = append(w.resp.Output, item)
	w.event("response.output_item.added", gin.H{"output_index": w.openIndex, "item": item})
}

func (w *responseWriter) deltaReasoning(text string) {
	if w.open != "reasoning" {
		w.begin("reasoning", reasoningItem{Type: "reasoning", ID: newID("rs_"), Summary: []reasoningPart{}, Content: []reasoningPart{}, Status: "in_progress"})
		w.event("response.content_part.added", w.at(gin.H{"part": reasoningPart{Type: "reasoning_text"}}))
	}
	w.text += text
	w.event("response.reasoning_text.delta", w.at(gin.H{"delta": text}))
}

func (w *responseWriter) deltaText(text string) {
	if w.open != "message" {
		w.begin("message", messageItem{Type: "message", ID: newID("msg_"), Status: "in_progress", Role: "assistant", Content: []outputText{}})
		w.event("response.content_part.added", w.at(gin.H{"part": outputText{Type: "output_text", Annotations: []any{}}}))
	}
	w.text += text
	w.event("response.output_text.delta", w.at(gin.H{"delta": text, "logprobs": []any{}}))
}

func (w *responseWriter) deltaCall(d backends.ToolCallDelta) {
	if w.open != "call" || w.callIndex != d.Index {
		if i, ok := w.calls[d.Index]; ok && w.open == "call" {
			// a later piece of an earlier call: calls stream one after another
			w.args[i] += d.Arguments
			w.finish(i, "completed")
			return
		}
		id := d.ID
		if id == "" {
			id = newID("call_")
		}
		w.begin("call", w.callItem(id, d.Name))
		w.callIndex = d.Index
		w.calls[d.Index] = w.openIndex
	} else if d.Name != "" {
		if item, ok := w.resp.Output[w.openIndex].(functionCallItem); ok {
			item.Name += d.Name
			w.resp.Output[w.openIndex] = item
		}
	}
	if d.Arguments == "" {
		return
	}
	i := w.openIndex
	w.args[i] += d.Arguments
	switch w.resp.Output[i].(type) {
	case functionCallItem:
		w.event("response.function_call_arguments.delta", gin.H{"item_id": w.itemID(), "output_index": i, "delta": d.Arguments})
	case customToolCallItem:
		// the input text decoded so far, past what was sent
		if text := partialInput(w.args[i]); len(text) > w.sent[i] {
			w.event("response.custom_tool_call_input.delta", gin.H{"item_id": w.itemID(), "output_index": i, "delta": text[w.sent[i]:]})
			w.sent[i] = len(text)
		}
	}
}

// callItem is the output item of a call of the model-facing function name:
// a function_call (namespace apart), custom_tool_call or tool_search_call.
func (w *responseWriter) callItem(callID, name string) any {
	o, ok := w.plan.tools.origin[name]
	if !ok {
		o = toolOrigin{kind: kindFunction, name: name}
	}
	switch o.kind {
	case kindCustom:
		return customToolCallItem{Type: "custom_tool_call", ID: newID("ctc_"), CallID: callID, Name: o.name, Namespace: o.namespace, Status: "in_progress"}
	case kindToolSearch:
		return toolSearchCallItem{Type: "tool_search_call", ID: newID("tsc_"), CallID: callID, Execution: "client",
			Arguments: json.RawMessage(`{}`), Status: "in_progress"}
	}
	return functionCallItem{Type: "function_call", ID: newID("fc_"), CallID: callID, Name: o.name, Namespace: o.namespace, Status: "in_progress"}
}

// finish sets call item i's arguments (input) from what was generated.
func (w *responseWriter) finish(i int, status string) {
	args := w.args[i]
	switch it := w.resp.Output[i].(type) {
	case functionCallItem:
		it.Arguments, it.Status = args, status
		w.resp.Output[i] = it
	case customToolCallItem:
		it.Input, it.Status = freeformInput(args), status
		w.resp.Output[i] = it
	case toolSearchCallItem:
		it.Arguments, it.Status = searchArguments(args), status
		w.resp.Output[i] = it
	}
}

// at adds the open item's id and indexes to an event's fields.
func (w *responseWriter) at(fields gin.H) gin.H {
	fields["item_id"], fields["output_index"], fields["content_index"] = w.itemID(), w.openIndex, 0
	return fields
}

func (w *responseWriter) itemID() string {
	switch it := w.resp.Output[w.openIndex].(type) {
	case messageItem:
		return it.ID
	case functionCallItem:
		return it.ID
	case customToolCallItem:
		return it.ID
	case toolSearchCallItem:
		return it.ID
	case reasoningItem:
		return it.ID
	}
	return ""
}

// close finishes the open item with status (an item cut by the length
// limit is incomplete).
func (w *responseWriter) close(status string) {
	if w.open == "" {
		return
	}
	i, text := w.openIndex, w.text
	switch it := w.resp.Output[i].(type) {
	case reasoningItem:
		part := reasoningPart{Type: "reasoning_text", Text: text}
		w.event("response.reasoning_text.done", w.at(gin.H{"text": text}))
		w.event("response.content_part.done", w.at(gin.H{"part": part}))
		it.Content = []reasoningPart{part}
		if w.summary {
			sum := reasoningPart{Type: "summary_text", Text: text}
			ev := gin.H{"item_id": it.ID, "output_index": i, "summary_index": 0}
			w.event("response.reasoning_summary_part.added", with(ev, "part", reasoningPart{Type: "summary_text"}))
			w.event("response.reasoning_summary_text.delta", with(ev, "delta", text))
			w.event("response.reasoning_summary_text.done", with(ev, "text", text))
			w.event("response.reasoning_summary_part.done", with(ev, "part", sum))
			it.Summary = []reasoningPart{sum}
		}
		it.Status = status
		w.resp.Output[i] = it
	case messageItem:
		part := outputText{Type: "output_text", Text: text, Annotations: []any{}}
		w.event("response.output_text.done", w.at(gin.H{"text": text, "logprobs": []any{}}))
		w.event("response.content_part.done", w.at(gin.H{"part": part}))
		it.Content, it.Status = []outputText{part}, status
		w.resp.Output[i] = it
	case functionCallItem:
		w.finish(i, status)
		w.event("response.function_call_arguments.done", gin.H{"item_id": it.ID, "output_index": i, "name": it.Name, "arguments": w.args[i]})
	case customToolCallItem:
		w.finish(i, status)
		input := w.resp.Output[i].(customToolCallItem).Input
		if len(input) > w.sent[i] && strings.HasPrefix(input, partialInput(w.args[i])[:w.sent[i]]) {
			w.event("response.custom_tool_call_input.delta", gin.H{"item_id": it.ID, "output_index": i, "delta": input[w.sent[i]:]})
		}
		w.event("response.custom_tool_call_input.done", gin.H{"item_id": it.ID, "output_index": i, "input": input})
	case toolSearchCallItem:
		w.finish(i, status)
	}
	w.event("response.output_item.done", gin.H{"output_index": i, "item": w.resp.Output[i]})
	w.open = ""
}

// with is a copy of fields with one more.
func with(fields gin.H, k string, v any) gin.H {
	out := gin.H{k: v}
	for key, val := range fields {
		out[key] = val
	}
	return out
}

// outputMessages is the response's output as conversation history: one
// assistant turn with its text and calls (reasoning is not carried, as
// chat templates drop earlier turns' reasoning).
func outputMessages(r *Response) []backends.Message {
	m := backends.Message{Role: "assistant"}
	for _, item := range r.Output {
		switch it := item.(type) {
		case messageItem:
			for _, p := range it.Content {
				m.Content += p.Text
			}
		case functionCallItem:
			m.ToolCalls = append(m.ToolCalls, backends.ToolCall{ID: it.CallID, Name: namespacedName(it.Namespace, it.Name), Arguments: it.Arguments})
		case customToolCallItem:
			m.ToolCalls = append(m.ToolCalls, backends.ToolCall{ID: it.CallID, Name: namespacedName(it.Namespace, it.Name), Arguments: freeformArguments(it.Input)})
		case toolSearchCallItem:
			m.ToolCalls = append(m.ToolCalls, backends.ToolCall{ID: it.CallID, Name: "tool_search", Arguments: compactJSON(it.Arguments)})
		}
	}
	if m.Content == "" && len(m.ToolCalls) == 0 {
		return nil
	}
	return []backends.Message{m}
}
