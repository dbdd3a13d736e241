package core

import (
	"cmp"
	"encoding/json"

	"github.com/modeld/modeld/backends"
)

// ToolPaths names one tool definition's fields in its dialect's words, for
// CheckToolDef: the rule of a tool definition is the core's, the paths are
// the dialect's.
type ToolPaths struct {
	// At is the tool's path in the request: tools[2].function (OpenAI,
	// Ollama), functions[0] (OpenAI's legacy functions), tools[1]
	// (Anthropic, Responses).
	At string
	// Schema names its parameters' field (parameters; Anthropic:
	// input_schema); required refuses a tool without one.
	Schema   string
	Required bool
	// NameRule says what a valid name is ("" is toolNameRule).
	NameRule string
}

// toolNameRule is what validToolName accepts, as refusals say it.
const toolNameRule = "must be 1 to 64 letters, digits, _ or -"

// CheckToolDef checks one tool definition: a name of letters, digits, _
// and - (at most 64) that defined does not know yet, and a schema that is
// a JSON Schema object (absent, unless d.required). Every problem is
// returned, named at d's paths.
func CheckToolDef(t backends.Tool, defined func(name string) bool, d ToolPaths) []error {
	var errs []error
	switch {
	case !validToolName(t.Name):
		errs = append(errs, BadRequest(d.At+".name", "%s.name %s %s", d.At, Quote(t.Name), cmp.Or(d.NameRule, toolNameRule)))
	case defined(t.Name):
		errs = append(errs, BadRequest(d.At+".name", "%s.name %s is defined twice", d.At, Quote(t.Name)))
	}
	var obj map[string]json.RawMessage
	if Given(t.Parameters) && json.Unmarshal(t.Parameters, &obj) != nil || d.Required && !Given(t.Parameters) {
		errs = append(errs, BadRequest(d.At+"."+d.Schema, "%s.%s must be a JSON Schema object", d.At, d.Schema))
	}
	return errs
}

// CheckTools checks the tool definitions of a dialect whose schema field is
// parameters; at gives the path of tools[i] in the request.
func CheckTools(tools []backends.Tool, at func(i int) string) []error {
	var errs []error
	for i, t := range tools {
		defined := func(name string) bool { return HasTool(tools[:i], name) }
		errs = append(errs, CheckToolDef(t, defined, ToolPaths{At: at(i), Schema: "parameters"})...)
	}
	return errs
}

// MeetToolChoice holds gen's tools to its tool choice: none drops them (not
// rendered, and no calls read from the output); required, or a named
// function, without such a tool is refused at param, the dialect's field.
func MeetToolChoice(gen *backends.Request, param string) error {
	switch tc := gen.ToolChoice; {
	case tc.Mode == backends.ToolChoiceNone:
		gen.Tools = nil
	case (tc.Mode == backends.ToolChoiceRequired || tc.Mode == backends.ToolChoiceFunction) && len(gen.Tools) == 0:
		return BadRequest(param, "%s %s needs tools", param, Quote(string(tc.Mode)))
	case tc.Mode == backends.ToolChoiceFunction && !HasTool(gen.Tools, tc.Name):
		return BadRequest(param, "%s names %s, which is not among the tools", param, Quote(tc.Name))
	}
	return nil
}
