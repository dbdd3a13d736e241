package api

import (
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// TestNewChatPlanCountsTextOnce: a message's bytes, the lower bound of its
// rendered prompt, count its text once whether it came as a string or as
// text parts (which Content joins), and its tool calls' fields.
func TestNewChatPlanCountsTextOnce(t *testing.T) {
	msgs := []backends.Message{
		{Role: "user", Content: "hello", Parts: []backends.ContentPart{{Type: backends.PartText, Text: "hello"}}},
		{Role: "assistant", ToolCalls: []backends.ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}}},
	}
	p, err := core.NewChatPlan(backends.Request{}, msgs, 4096, core.ConvFields{Conversation: "messages"})
	if err != nil {
		t.Fatal(err)
	}
	if want := len("user") + len("hello") + len("assistant") + len("c1") + len("f") + len("{}"); p.Bytes != want {
		t.Errorf("bytes = %d, want %d", p.Bytes, want)
	}
}
