package core

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends"
)

// TestParseToolChoice reads the three spellings the dialects use (bare
// strings, {type} modes, named objects at a flat or nested path, Extra
// types) and refuses the rest at the dialect's own field.
func TestParseToolChoice(t *testing.T) {
	openai := ToolChoiceWire{Field: "tool_choice",
		Strings: map[string]backends.ToolChoiceMode{"auto": backends.ToolChoiceAuto, "none": backends.ToolChoiceNone, "required": backends.ToolChoiceRequired},
		Named:   []string{"function"}, NamePath: "function.name"}
	legacy := ToolChoiceWire{Field: "function_call",
		Strings: map[string]backends.ToolChoiceMode{"auto": backends.ToolChoiceAuto, "none": backends.ToolChoiceNone},
		Named:   []string{""}, NamePath: "name"}
	anthropic := ToolChoiceWire{Field: "tool_choice",
		Types: map[string]backends.ToolChoiceMode{"auto": backends.ToolChoiceAuto, "any": backends.ToolChoiceRequired, "none": backends.ToolChoiceNone},
		Named: []string{"tool"}, NamePath: "name"}
	extra := ToolChoiceWire{Field: "tool_choice", Named: []string{"function"}, NamePath: "name", Extra: []string{"allowed_tools"}}
	for _, c := range []struct {
		wire      ToolChoiceWire
		raw       string
		mode      backends.ToolChoiceMode
		name, typ string
		param     string // "" when it parses
	}{
		{openai, `"required"`, backends.ToolChoiceRequired, "", "", ""},
		{openai, `{"type":"function","function":{"name":"f"}}`, backends.ToolChoiceFunction, "f", "function", ""},
		{openai, `"any"`, "", "", "", "tool_choice"},
		{openai, `{"type":"function","name":"f"}`, "", "", "function", "tool_choice.function.name"},
		{openai, `{"type":"tool","name":"f"}`, "", "", "tool", "tool_choice.type"},
		{openai, `7`, "", "", "", "tool_choice"},
		{legacy, `{"name":"g"}`, backends.ToolChoiceFunction, "g", "", ""},
		{legacy, `"required"`, "", "", "", "function_call"},
		{anthropic, `{"type":"any"}`, backends.ToolChoiceRequired, "", "any", ""},
		{anthropic, `{"type":"tool","name":"h"}`, backends.ToolChoiceFunction, "h", "tool", ""},
		{anthropic, `{"type":"tool"}`, "", "", "tool", "tool_choice.name"},
		{anthropic, `"auto"`, "", "", "", "tool_choice"},
		{anthropic, `{"type":5}`, "", "", "", "tool_choice.type"},
		{extra, `{"type":"allowed_tools","tools":[]}`, "", "", "allowed_tools", ""},
		{extra, `{"type":"web_search"}`, "", "", "web_search", "tool_choice.type"},
	} {
		choice, typ, err := ParseToolChoice(json.RawMessage(c.raw), c.wire)
		if c.param != "" {
			var ae *Error
			if !errors.As(err, &ae) || ae.Param == nil || *ae.Param != c.param || !strings.Contains(ae.Message, c.wire.Field) {
				t.Errorf("%s %s: err = %v, want a 400 at %s naming %s", c.wire.Field, c.raw, err, c.param, c.wire.Field)
			}
			continue
		}
		if err != nil || choice.Mode != c.mode || choice.Name != c.name || typ != c.typ {
			t.Errorf("%s %s = %+v, %q, %v; want mode %q name %q type %q", c.wire.Field, c.raw, choice, typ, err, c.mode, c.name, c.typ)
		}
	}
	// Every refusal lists the spellings of its own dialect only.
	_, _, err := ParseToolChoice(json.RawMessage(`[]`), anthropic)
	if msg := err.Error(); !strings.Contains(msg, "{type: auto|none|any}") || strings.Contains(msg, "required") {
		t.Errorf("anthropic refusal = %q", msg)
	}
}
