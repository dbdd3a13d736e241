package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// The Responses API's input: a string or a list of items, translated into
// the chat core's messages (and kept, with ids, as input_items lists them).

// responseInputItem is one item of input, of any type.
type responseInputItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	// Arguments is a function_call's JSON text (a string), or a
	// tool_search_call's arguments (a JSON value).
	Arguments json.RawMessage `json:"arguments"`
	Input     *string         `json:"input"`
	Output    json.RawMessage `json:"output"`
	Tools     json.RawMessage `json:"tools"`
}

// loadedTools are the tools a tool_search_output item of the input loaded.
type loadedTools struct {
	param string
	tools json.RawMessage
}

// responsePart is one content part of an input message or tool output.
type responsePart struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
	// ImageURL is an input_image's data URL (a remote URL is refused by
	// the core); FileID an uploaded file's id, which modeld does not hold.
	ImageURL string `json:"image_url"`
	FileID   string `json:"file_id"`
}

var responseRoles = map[string]string{"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}

// responseInput translates input (a string, or a list of items) into
// messages, and gives the items as input_items lists them. A
// function_call item joins the assistant turn before it (a template wants
// one assistant turn with all its calls); reasoning items of earlier turns
// are accepted and left out of the prompt, as chat templates leave out
// earlier reasoning.
func responseInput(raw json.RawMessage) ([]backends.Message, []json.RawMessage, []loadedTools, error) {
	if !core.Given(raw) {
		return nil, nil, nil, core.BadRequest("input", "input is required: a string or a list of input items")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		item, _ := json.Marshal(inputMessageItem{Type: "message", ID: core.NewID("msg_"), Role: "user", Content: []reasoningPart{{Type: "input_text", Text: text}}})
		return []backends.Message{{Role: "user", Content: text}}, []json.RawMessage{item}, nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, nil, nil, core.BadRequest("input", "input must be a string or a list of input items")
	}
	if n := len(items); n > core.MaxChatMessages {
		return nil, nil, nil, core.TooMany("input", n, core.MaxChatMessages, "items")
	}
	var msgs []backends.Message
	var loaded []loadedTools
	var errs []error
	// call appends a call to the assistant turn before it (or a new one)
	call := func(c backends.ToolCall) {
		if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
			msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, c)
		} else {
			msgs = append(msgs, backends.Message{Role: "assistant", ToolCalls: []backends.ToolCall{c}})
		}
	}
	// result appends a tool result
	result := func(param, kind string, it responseInputItem) {
		if it.CallID == "" || !core.Given(it.Output) {
			errs = append(errs, core.BadRequest(param, "%s is a %s and needs call_id and output", param, kind))
			return
		}
		out, parts, err := partsText(it.Output, param+".output")
		if err != nil {
			errs = append(errs, err)
			return
		}
		msgs = append(msgs, backends.Message{Role: "tool", ToolCallID: it.CallID, Content: out, Parts: parts})
	}
	for i, rawItem := range items {
		param := fmt.Sprintf("input[%d]", i)
		var it responseInputItem
		if err := json.Unmarshal(rawItem, &it); err != nil {
			errs = append(errs, core.BadRequest(param, "%s must be an input item object", param))
			continue
		}
		switch it.Type {
		case "", "message":
			role, ok := responseRoles[it.Role]
			if !ok {
				errs = append(errs, core.BadRequest(param+".role", "%s.role %s is not one of user, assistant, system, developer", param, core.Quote(it.Role)))
				continue
			}
			content, parts, err := partsText(it.Content, param+".content")
			if err != nil {
				errs = append(errs, err)
				continue
			}
			msgs = append(msgs, backends.Message{Role: role, Content: content, Parts: parts})
		case "function_call":
			var args string
			if it.CallID == "" || it.Name == "" || json.Unmarshal(it.Arguments, &args) != nil {
				errs = append(errs, core.BadRequest(param, "%s is a function_call and needs call_id, name and arguments (a string)", param))
				continue
			}
			call(backends.ToolCall{ID: it.CallID, Name: namespacedName(it.Namespace, it.Name), Arguments: args})
		case "custom_tool_call":
			if it.CallID == "" || it.Name == "" || it.Input == nil {
				errs = append(errs, core.BadRequest(param, "%s is a custom_tool_call and needs call_id, name and input", param))
				continue
			}
			call(backends.ToolCall{ID: it.CallID, Name: namespacedName(it.Namespace, it.Name), Arguments: FreeformArguments(*it.Input)})
		case "tool_search_call":
			if it.CallID == "" {
				// a search the server ran: nothing the model's template can show
				continue
			}
			args := "{}"
			if core.Given(it.Arguments) {
				args = compactJSON(it.Arguments)
			}
			call(backends.ToolCall{ID: it.CallID, Name: "tool_search", Arguments: args})
		case "function_call_output":
			result(param, "function_call_output", it)
		case "custom_tool_call_output":
			result(param, "custom_tool_call_output", it)
		case "tool_search_output":
			if core.Given(it.Tools) {
				loaded = append(loaded, loadedTools{param: param + ".tools", tools: it.Tools})
			}
			if it.CallID != "" {
				msgs = append(msgs, backends.Message{Role: "tool", ToolCallID: it.CallID, Content: loadedSummary(it.Tools)})
			}
		case "reasoning":
			// history only: not rendered
		case "item_reference":
			errs = append(errs, core.BadRequest(param+".type", "%s is an item_reference; send the item itself, or continue with previous_response_id", param))
		default:
			errs = append(errs, core.BadRequest(param+".type", "%s has type %s, which modeld does not take; input items are messages, function_call, custom_tool_call, tool_search_call, their outputs and reasoning (%s)",
				param, core.Quote(it.Type), builtinToolsHint))
		}
	}
	if err := core.JoinBadRequests(errs); err != nil {
		return nil, nil, nil, err
	}
	return msgs, withItemIDs(items), loaded, nil
}

// FreeformArguments are a freeform call's arguments: {"input": text}.
func FreeformArguments(text string) string {
	b, _ := json.Marshal(map[string]string{"input": text}) // a string always encodes
	return string(b)
}

// compactJSON is raw without insignificant whitespace (raw as it is when
// it does not parse).
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// loadedSummary is a tool_search_output as the model reads it: the names
// of the tools it loaded (their definitions join the request's tools).
func loadedSummary(raw json.RawMessage) string {
	ts := &responseTools{origin: map[string]toolOrigin{}}
	if ts.loaded(raw, "tools") != nil {
		return compactJSON(raw)
	}
	names := make([]string, len(ts.tools))
	for i, t := range ts.tools {
		names[i] = t.Name
	}
	b, _ := json.Marshal(map[string][]string{"loaded_tools": names})
	return string(b)
}

// nameToolResults gives each tool result the name of the call it answers
// (some templates render it), from calls of this input or of the stored
// conversation.
func nameToolResults(msgs []backends.Message) {
	names := map[string]string{}
	for i, m := range msgs {
		for _, tc := range m.ToolCalls {
			names[tc.ID] = tc.Name
		}
		if m.Role == "tool" && m.Name == "" {
			msgs[i].Name = names[m.ToolCallID]
		}
	}
}

// partsText is the text of a content field: a string, or a list of text
// parts (input_text, output_text; refusal text in an assistant's history)
// and input_image parts, which are given as the message's parts too. A file
// or audio part is a 400.
func partsText(raw json.RawMessage, param string) (string, []backends.ContentPart, error) {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return text, nil, nil
	}
	var parts []responsePart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, core.BadRequest(param, "%s must be a string or a list of content parts", param)
	}
	var sb strings.Builder
	var out []backends.ContentPart
	images := false
	for j, p := range parts {
		at := fmt.Sprintf("%s[%d]", param, j)
		switch p.Type {
		case "input_text", "output_text", "text":
			sb.WriteString(p.Text)
			out = append(out, backends.ContentPart{Type: backends.PartText, Text: p.Text, WireType: p.Type})
		case "refusal":
			sb.WriteString(p.Refusal)
			out = append(out, backends.ContentPart{Type: backends.PartText, Text: p.Refusal, WireType: p.Type})
		case "input_image":
			if p.ImageURL == "" {
				return "", nil, core.BadRequest(at+".image_url", "%s needs image_url (a data URL): modeld holds no uploaded files (file_id)", at)
			}
			out = append(out, backends.ContentPart{Type: backends.PartImage, URL: p.ImageURL, WireType: p.Type})
			images = true
		case "input_file", "input_audio":
			return "", nil, core.BadRequest(at, "%s is an %s part; modeld's chat models read text and images (input_text, input_image)", at, p.Type)
		default:
			return "", nil, core.BadRequest(at, "%s has type %s; content parts are input_text, input_image, output_text or refusal", at, core.Quote(p.Type))
		}
	}
	if !images {
		out = nil // text alone: the content says it all
	}
	return sb.String(), out, nil
}

// withItemIDs gives each item an id (as the stored input items have
// them), keeping the item as sent otherwise.
func withItemIDs(items []json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, len(items))
	for i, raw := range items {
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil {
			out[i] = raw
			continue
		}
		if id, _ := m["id"].(string); id == "" {
			prefix := "msg_"
			switch m["type"] {
			case "function_call":
				prefix = "fc_"
			case "custom_tool_call":
				prefix = "ctc_"
			case "tool_search_call":
				prefix = "tsc_"
			case "tool_search_output":
				prefix = "tso_"
			case "custom_tool_call_output":
				prefix = "ctco_"
			case "function_call_output":
				prefix = "fco_"
			case "reasoning":
				prefix = "rs_"
			}
			m["id"] = core.NewID(prefix)
		}
		if _, ok := m["type"]; !ok {
			m["type"] = "message"
		}
		out[i], _ = json.Marshal(m)
	}
	return out
}

// inputMessageItem is a message as input_items lists it.
type inputMessageItem struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content []reasoningPart `json:"content"` // input_text parts
}
