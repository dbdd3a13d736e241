package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// The Messages dialect's conversation: the system prompt and the turns,
// translated onto the internal messages (anthropic.go plans the request).

// system is the system prompt as a first message: a string or text blocks
// (systemText).
func (req *AnthropicRequest) system(keepBillingHeader bool) ([]backends.Message, error) {
	if !core.Given(req.System) {
		return nil, nil
	}
	text, err := systemText("system", req.System, keepBillingHeader)
	if err != nil {
		return nil, err
	}
	if text == "" {
		return nil, nil
	}
	return []backends.Message{{Role: "system", Content: text}}, nil
}

// systemText is the text of a system prompt, the top-level field's or a
// system message's (param names it): a string, or text blocks joined by a
// blank line. cache_control and the blocks' other fields are hints modeld
// has no use for. Claude Code's attribution line is dropped unless
// keepBillingHeader (DropBillingHeader).
func systemText(param string, raw json.RawMessage, keepBillingHeader bool) (string, error) {
	drop := func(s string) string {
		if keepBillingHeader {
			return s
		}
		return DropBillingHeader(s)
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return drop(text), nil
	}
	var blocks []anthropicInBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return "", core.BadRequest(param, "%s must be a string or an array of text blocks", param)
	}
	parts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" {
			return "", core.BadRequest(fmt.Sprintf("%s[%d]", param, i), "%s[%d] has type %s; system blocks must be text", param, i, core.Quote(b.Type))
		}
		if t := drop(b.Text); t != "" || b.Text == "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n\n"), nil
}

// emptyContent reports whether content is an empty string or has no text.
func emptyContent(raw json.RawMessage) bool {
	text, err := systemText("", raw, true)
	return err == nil && text == ""
}

// billingHeader starts the line Claude Code puts first in its system
// prompt: "x-anthropic-billing-header: cc_version=2.1.328.<3 hex digits of
// the session's first prompt>; cc_entrypoint=…". It is attribution for
// Anthropic's servers, not an instruction to the model, and it differs
// between sessions: kept, it is the first thing the prompts of two sessions
// differ in, and the second session reuses nothing of the first's cache.
const billingHeader = "x-anthropic-billing-header:"

// DropBillingHeader removes a leading attribution line from a system text
// (the whole text, when that line is all of it).
func DropBillingHeader(s string) string {
	t := strings.TrimLeft(s, " \t\r\n")
	if !strings.HasPrefix(t, billingHeader) {
		return s
	}
	if i := strings.IndexByte(t, '\n'); i >= 0 {
		return strings.TrimLeft(t[i+1:], "\r\n")
	}
	return ""
}

// translate turns the i-th message into internal messages: text blocks
// are joined by a blank line, as system blocks are; a user turn's
// tool_result blocks become tool messages (in their place among its text),
// an assistant turn's tool_use blocks its tool calls. Thinking blocks sent
// back are dropped: chat templates do not render earlier turns' reasoning.
// A system message (Claude Code sends its environment block as one, for a
// model it does not know) stays a system message where it stands: the
// chat template places it (docs/API.md says what a template that cannot
// gets).
func (m *anthropicMessage) translate(i int, keepBillingHeader bool) ([]backends.Message, error) {
	param := fmt.Sprintf("messages[%d]", i)
	switch m.Role {
	case "user", "assistant":
	case "system":
		if !core.Given(m.Content) {
			return nil, core.BadRequest(param+".content", "%s.content is required", param)
		}
		text, err := systemText(param+".content", m.Content, keepBillingHeader)
		if err != nil {
			return nil, err
		}
		if text == "" && !emptyContent(m.Content) {
			return nil, nil // it held the attribution line alone
		}
		return []backends.Message{{Role: "system", Content: text}}, nil
	default:
		return nil, core.BadRequest(param+".role", "%s.role %s is not one of user, assistant, system", param, core.Quote(m.Role))
	}
	var text string
	if json.Unmarshal(m.Content, &text) == nil {
		return []backends.Message{{Role: m.Role, Content: text}}, nil
	}
	var blocks []anthropicInBlock
	if json.Unmarshal(m.Content, &blocks) != nil {
		return nil, core.BadRequest(param+".content", "%s.content must be a string or an array of content blocks", param)
	}
	var out []backends.Message
	cur := backends.Message{Role: m.Role}
	open := false
	flush := func() {
		if open {
			out = append(out, cur)
		}
		cur, open = backends.Message{Role: m.Role}, false
	}
	for j, b := range blocks {
		bp := fmt.Sprintf("%s.content[%d]", param, j)
		switch b.Type {
		case "text":
			if open && cur.Content != "" {
				cur.Content += "\n\n"
			}
			cur.Content += b.Text
			cur.Parts = append(cur.Parts, backends.ContentPart{Type: backends.PartText, Text: b.Text, WireType: "text"})
			open = true
		case "tool_use":
			if m.Role != "assistant" {
				return nil, core.BadRequest(bp, "%s is a tool_use block, which only an assistant message holds", bp)
			}
			if b.Name == "" || b.ID == "" {
				return nil, core.BadRequest(bp, "%s (tool_use) needs an id and a name", bp)
			}
			args := "{}"
			if core.Given(b.Input) {
				var obj map[string]json.RawMessage
				if json.Unmarshal(b.Input, &obj) != nil {
					return nil, core.BadRequest(bp+".input", "%s.input must be an object", bp)
				}
				args = string(b.Input)
			}
			cur.ToolCalls = append(cur.ToolCalls, backends.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
			open = true
		case "tool_result":
			if m.Role != "user" {
				return nil, core.BadRequest(bp, "%s is a tool_result block, which only a user message holds", bp)
			}
			if b.ToolUseID == "" {
				return nil, core.BadRequest(bp+".tool_use_id", "%s.tool_use_id is required", bp)
			}
			result, images, err := toolResult(bp, b.Content)
			if err != nil {
				return nil, err
			}
			if b.IsError {
				result = "Error: " + result
			}
			flush()
			out = append(out, backends.Message{Role: "tool", Content: result, Parts: images, ToolCallID: b.ToolUseID})
		case "thinking", "redacted_thinking":
			if m.Role != "assistant" {
				return nil, core.BadRequest(bp, "%s is a %s block, which only an assistant message holds", bp, b.Type)
			}
		case "image":
			part, err := imagePart(bp, b.Source)
			if err != nil {
				return nil, err
			}
			cur.Parts = append(cur.Parts, part)
			open = true
		case "document":
			return nil, core.BadRequest(bp, "%s is a document block; modeld's chat models read text and images", bp)
		default:
			return nil, core.BadRequest(bp, "%s has type %s, which is not supported (text, image, tool_use, tool_result, thinking)", bp, core.Quote(b.Type))
		}
	}
	flush()
	if len(out) == 0 { // an empty array: an empty turn
		out = append(out, backends.Message{Role: m.Role})
	}
	return out, nil
}

// toolResult is a tool_result's content: a string, or text and image
// blocks (Claude Code's Read tool returns images so); the text is joined,
// the images are the message's parts.
func toolResult(param string, content json.RawMessage) (string, []backends.ContentPart, error) {
	if !core.Given(content) {
		return "", nil, nil
	}
	var text string
	if json.Unmarshal(content, &text) == nil {
		return text, nil, nil
	}
	var blocks []anthropicInBlock
	if json.Unmarshal(content, &blocks) != nil {
		return "", nil, core.BadRequest(param+".content", "%s.content must be a string or an array of text and image blocks", param)
	}
	var images []backends.ContentPart
	var sb strings.Builder
	for k, b := range blocks {
		switch b.Type {
		case "text":
			if sb.Len() > 0 {
				sb.WriteString("\n")
			}
			sb.WriteString(b.Text)
		case "image":
			part, err := imagePart(fmt.Sprintf("%s.content[%d]", param, k), b.Source)
			if err != nil {
				return "", nil, err
			}
			images = append(images, part)
		default:
			return "", nil, core.BadRequest(fmt.Sprintf("%s.content[%d]", param, k), "%s.content[%d] has type %s; a tool result holds text and images", param, k, core.Quote(b.Type))
		}
	}
	return sb.String(), images, nil
}
