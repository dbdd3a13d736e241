package api

import (
	"cmp"
	"encoding/json"

	"github.com/modeld/modeld/backends"
)

// toolPaths names one tool definition's fields in its dialect's words, for
// checkToolDef: the rule of a tool definition is the core's, the paths are
// the dialect's.
type toolPaths struct {
	// at is the tool's path in the request: tools[2].function (OpenAI,
	// Ollama), functions[0] (OpenAI's legacy functions), tools[1]
	// (Anthropic, Responses).
	at string
	// schema names its parameters' field (parameters; Anthropic:
	// input_schema); required refuses a tool without one.
	schema   string
	required bool
	// nameRule says what a valid name is ("" is toolNameRule).
	nameRule string
}

// toolNameRule is what validToolName accepts, as refusals say it.
const toolNameRule = "must be 1 to 64 letters, digits, _ or -"

// checkToolDef checks one tool definition: a name of letters, digits, _
// and - (at most 64) that defined does not know yet, and a schema that is
// a JSON Schema object (absent, unless d.required). Every problem is
// returned, named at d's paths.
func checkToolDef(t backends.Tool, defined func(name string) bool, d toolPaths) []error {
	var errs []error
	switch {
	case !validToolName(t.Name):
		errs = append(errs, badRequest(d.at+".name", "%s.name %s %s", d.at, quote(t.Name), cmp.Or(d.nameRule, toolNameRule)))
	case defined(t.Name):
		errs = append(errs, badRequest(d.at+".name", "%s.name %s is defined twice", d.at, quote(t.Name)))
	}
	var obj map[string]json.RawMessage
	if given(t.Parameters) && json.Unmarshal(t.Parameters, &obj) != nil || d.required && !given(t.Parameters) {
		errs = append(errs, badRequest(d.at+"."+d.schema, "%s.%s must be a JSON Schema object", d.at, d.schema))
	}
	return errs
}

// checkTools checks the tool definitions of a dialect whose schema field is
// parameters; at gives the path of tools[i] in the request.
func checkTools(tools []backends.Tool, at func(i int) string) []error {
	var errs []error
	for i, t := range tools {
		defined := func(name string) bool { return hasTool(tools[:i], name) }
		errs = append(errs, checkToolDef(t, defined, toolPaths{at: at(i), schema: "parameters"})...)
	}
	return errs
}

// meetToolChoice holds gen's tools to its tool choice: none drops them (not
// rendered, and no calls read from the output); required, or a named
// function, without such a tool is refused at param, the dialect's field.
func meetToolChoice(gen *backends.Request, param string) error {
	switch tc := gen.ToolChoice; {
	case tc.Mode == backends.ToolChoiceNone:
		gen.Tools = nil
	case (tc.Mode == backends.ToolChoiceRequired || tc.Mode == backends.ToolChoiceFunction) && len(gen.Tools) == 0:
		return badRequest(param, "%s %s needs tools", param, quote(string(tc.Mode)))
	case tc.Mode == backends.ToolChoiceFunction && !hasTool(gen.Tools, tc.Name):
		return badRequest(param, "%s names %s, which is not among the tools", param, quote(tc.Name))
	}
	return nil
}
