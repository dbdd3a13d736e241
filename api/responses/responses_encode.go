package responses

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// write reads the generation to its end and answers. It returns the final
// response and whether it completed (or stopped incomplete) so that it
// may be stored.
func (w *responseWriter) write(events <-chan backends.Event) (*Response, bool) {
	w.event("response.created", gin.H{"response": w.snapshot()})
	w.event("response.in_progress", gin.H{"response": w.snapshot()})
	core.StreamEvents(w.c.Request.Context(), events, 1, w)
	if !w.finished {
		return nil, false
	}
	return &w.resp, true
}

// Delta adds an event's reasoning, text and call deltas to the output.
func (w *responseWriter) Delta(ev backends.Event) {
	if ev.Reasoning != "" {
		w.deltaReasoning(ev.Reasoning)
	}
	if ev.Text != "" {
		w.deltaText(ev.Text)
	}
	for _, d := range ev.ToolCalls {
		w.deltaCall(d)
	}
}

// Finish closes the output, completed or incomplete, and answers.
func (w *responseWriter) Finish(ev backends.Event) {
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
	w.finished = true
	if w.sse == nil {
		w.c.JSON(http.StatusOK, w.resp)
	} else {
		w.event("response."+status, gin.H{"response": w.snapshot()})
	}
}

// End answers a generation whose events ended without a final event: the
// backend broke its contract.
func (w *responseWriter) End() {
	if !w.finished {
		w.Fail(errors.New("generation ended without a final event"))
	}
}

// Fail answers an error: an error status when not streamed, else the
// stream's error event and response.failed.
func (w *responseWriter) Fail(err error) {
	if w.sse == nil {
		core.WriteError(w.c, err)
		return
	}
	w.failStream(err)
}

// failStream ends a stream with an error event and response.failed.
func (w *responseWriter) failStream(err error) {
	e := core.ToAPIError(core.AsCut(w.c, err))
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
		w.begin("reasoning", reasoningItem{Type: "reasoning", ID: core.NewID("rs_"), Summary: []reasoningPart{}, Content: []reasoningPart{}, Status: "in_progress"})
		w.event("response.content_part.added", w.at(gin.H{"part": reasoningPart{Type: "reasoning_text"}}))
	}
	w.text += text
	w.event("response.reasoning_text.delta", w.at(gin.H{"delta": text}))
}

func (w *responseWriter) deltaText(text string) {
	if w.open != "message" {
		w.begin("message", MessageItem{Type: "message", ID: core.NewID("msg_"), Status: "in_progress", Role: "assistant", Content: []OutputText{}})
		w.event("response.content_part.added", w.at(gin.H{"part": OutputText{Type: "output_text", Annotations: []any{}}}))
	}
	w.text += text
	w.event("response.output_text.delta", w.at(gin.H{"delta": text, "logprobs": []any{}}))
}

func (w *responseWriter) deltaCall(d backends.ToolCallDelta) {
	if w.open != "call" || w.callIndex != d.Index {
		if i, ok := w.calls[d.Index]; ok && w.open == "call" {
			// a later piece of an earlier call: calls stream one after another
			w.args[i] += d.Arguments
			w.finishCall(i, "completed")
			return
		}
		id := d.ID
		if id == "" {
			id = core.NewID("call_")
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
		if text := PartialInput(w.args[i]); len(text) > w.sent[i] {
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
		return customToolCallItem{Type: "custom_tool_call", ID: core.NewID("ctc_"), CallID: callID, Name: o.name, Namespace: o.namespace, Status: "in_progress"}
	case kindToolSearch:
		return toolSearchCallItem{Type: "tool_search_call", ID: core.NewID("tsc_"), CallID: callID, Execution: "client",
			Arguments: json.RawMessage(`{}`), Status: "in_progress"}
	}
	return functionCallItem{Type: "function_call", ID: core.NewID("fc_"), CallID: callID, Name: o.name, Namespace: o.namespace, Status: "in_progress"}
}

// finishCall sets call item i's arguments (input) from what was generated.
func (w *responseWriter) finishCall(i int, status string) {
	args := w.args[i]
	switch it := w.resp.Output[i].(type) {
	case functionCallItem:
		it.Arguments, it.Status = args, status
		w.resp.Output[i] = it
	case customToolCallItem:
		it.Input, it.Status = FreeformInput(args), status
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
	case MessageItem:
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
	case MessageItem:
		part := OutputText{Type: "output_text", Text: text, Annotations: []any{}}
		w.event("response.output_text.done", w.at(gin.H{"text": text, "logprobs": []any{}}))
		w.event("response.content_part.done", w.at(gin.H{"part": part}))
		it.Content, it.Status = []OutputText{part}, status
		w.resp.Output[i] = it
	case functionCallItem:
		w.finishCall(i, status)
		w.event("response.function_call_arguments.done", gin.H{"item_id": it.ID, "output_index": i, "name": it.Name, "arguments": w.args[i]})
	case customToolCallItem:
		w.finishCall(i, status)
		input := w.resp.Output[i].(customToolCallItem).Input
		if len(input) > w.sent[i] && strings.HasPrefix(input, PartialInput(w.args[i])[:w.sent[i]]) {
			w.event("response.custom_tool_call_input.delta", gin.H{"item_id": it.ID, "output_index": i, "delta": input[w.sent[i]:]})
		}
		w.event("response.custom_tool_call_input.done", gin.H{"item_id": it.ID, "output_index": i, "input": input})
	case toolSearchCallItem:
		w.finishCall(i, status)
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
		case MessageItem:
			for _, p := range it.Content {
				m.Content += p.Text
			}
		case functionCallItem:
			m.ToolCalls = append(m.ToolCalls, backends.ToolCall{ID: it.CallID, Name: namespacedName(it.Namespace, it.Name), Arguments: it.Arguments})
		case customToolCallItem:
			m.ToolCalls = append(m.ToolCalls, backends.ToolCall{ID: it.CallID, Name: namespacedName(it.Namespace, it.Name), Arguments: FreeformArguments(it.Input)})
		case toolSearchCallItem:
			m.ToolCalls = append(m.ToolCalls, backends.ToolCall{ID: it.CallID, Name: "tool_search", Arguments: compactJSON(it.Arguments)})
		}
	}
	if m.Content == "" && len(m.ToolCalls) == 0 {
		return nil
	}
	return []backends.Message{m}
}
