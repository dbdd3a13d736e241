package core

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modeld/modeld/backends"
)

// ToolChoiceWire is how a dialect spells tool_choice: the one parser,
// ParseToolChoice, reads every dialect's field with it, and its refusals
// name the dialect's field and spellings.
type ToolChoiceWire struct {
	// Field is the request's field ("tool_choice", or OpenAI's legacy
	// "function_call").
	Field string
	// Strings are the bare-string spellings and the modes they mean
	// (OpenAI's "auto", "none", "required").
	Strings map[string]backends.ToolChoiceMode
	// Types are the object spellings {"type": T} that mean a mode (Anthropic's
	// {"type": "any"}).
	Types map[string]backends.ToolChoiceMode
	// Named are the object types that name one tool, and NamePath where the
	// name is: "name", or "function.name" for OpenAI's
	// {"type": "function", "function": {"name": ...}}. A Named entry of ""
	// is an object with a name and no type (the legacy {"name": ...}).
	Named    []string
	NamePath string
	// Extra are object types the dialect reads itself: ParseToolChoice
	// returns their type and leaves the choice to the dialect. "*" is every
	// other type (a dialect that explains which tool types it cannot run).
	Extra []string
}

// ParseToolChoice reads raw (present: Given) as w spells it. typ is the
// object's type ("" for a string); for an Extra type the choice is zero
// and the dialect reads raw itself.
func ParseToolChoice(raw json.RawMessage, w ToolChoiceWire) (choice backends.ToolChoice, typ string, err error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if m, ok := w.Strings[s]; ok {
			return backends.ToolChoice{Mode: m}, "", nil
		}
		if len(w.Strings) > 0 {
			return choice, "", BadRequest(w.Field, "%s %s is not one of %s", w.Field, Quote(s), strings.Join(sortedKeys(w.Strings), ", "))
		}
		return choice, "", BadRequest(w.Field, "%s must be %s", w.Field, w.describe())
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return choice, "", BadRequest(w.Field, "%s must be %s", w.Field, w.describe())
	}
	if t, present := obj["type"]; present && json.Unmarshal(t, &typ) != nil {
		return choice, "", BadRequest(w.Field+".type", "%s.type must be a string", w.Field)
	}
	if m, ok := w.Types[typ]; ok && typ != "" {
		return backends.ToolChoice{Mode: m}, typ, nil
	}
	if typ != "" && (slices.Contains(w.Extra, typ) || slices.Contains(w.Extra, "*")) {
		return choice, typ, nil
	}
	if !slices.Contains(w.Named, typ) {
		if typ == "" {
			return choice, "", BadRequest(w.Field, "%s must be %s", w.Field, w.describe())
		}
		return choice, typ, BadRequest(w.Field+".type", "%s.type %s is not one of %s", w.Field, Quote(typ), strings.Join(w.types(), ", "))
	}
	name, ok := nameAt(obj, w.NamePath)
	if !ok || name == "" {
		return choice, typ, BadRequest(w.Field+"."+w.NamePath, "%s of type %s needs %s", w.Field, Quote(typ), w.NamePath)
	}
	return backends.ToolChoice{Mode: backends.ToolChoiceFunction, Name: name}, typ, nil
}

// nameAt is the string at a dotted path of obj.
func nameAt(obj map[string]json.RawMessage, path string) (string, bool) {
	head, rest, nested := strings.Cut(path, ".")
	raw, ok := obj[head]
	if !ok {
		return "", false
	}
	if nested {
		var inner map[string]json.RawMessage
		if json.Unmarshal(raw, &inner) != nil {
			return "", false
		}
		return nameAt(inner, rest)
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// types are the object types w accepts, in a stable order.
func (w ToolChoiceWire) types() []string {
	out := sortedKeys(w.Types)
	for _, t := range append(slices.Clone(w.Named), w.Extra...) {
		if t != "" && t != "*" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// describe says every spelling w accepts, for a refusal.
func (w ToolChoiceWire) describe() string {
	var parts []string
	parts = append(parts, sortedKeys(w.Strings)...)
	if len(w.Types) > 0 {
		parts = append(parts, "{type: "+strings.Join(sortedKeys(w.Types), "|")+"}")
	}
	name := "name"
	if head, rest, ok := strings.Cut(w.NamePath, "."); ok {
		name = head + ": {" + rest + "}"
	}
	for _, t := range w.Named {
		if t == "" {
			parts = append(parts, "{"+name+"}")
		} else {
			parts = append(parts, fmt.Sprintf("{type: %q, %s}", t, name))
		}
	}
	for _, t := range w.Extra {
		if t != "*" {
			parts = append(parts, fmt.Sprintf("{type: %q, ...}", t))
		}
	}
	if len(parts) > 1 {
		return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
	}
	return strings.Join(parts, "")
}

// sortedKeys are m's keys in the order OpenAI documents them (auto, none,
// required and its spellings), then by name.
func sortedKeys(m map[string]backends.ToolChoiceMode) []string {
	rank := map[backends.ToolChoiceMode]int{backends.ToolChoiceAuto: 0, backends.ToolChoiceNone: 1, backends.ToolChoiceRequired: 2, backends.ToolChoiceFunction: 3}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if d := rank[m[a]] - rank[m[b]]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return keys
}
