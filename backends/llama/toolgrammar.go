package llama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/grammar"
	"github.com/modeld/modeld/backends/llama/grammar/lark"
)

// CompileToolChoice writes to r.ToolChoice.Grammar the GBNF grammar of one
// call object of the tools r.ToolChoice allows (all of them; under a named
// function that one), each tool's arguments under its parameters schema;
// the engine wraps it in the template family's call syntax.
//
// A schema the converter refuses is a *backends.SchemaError
// naming the tool and the keyword at its path, with one exception: under
// auto, a keyword the grammar cannot enforce (an *grammar.UnsupportedError:
// uniqueItems, patternProperties, a lookaround in a pattern...) relaxes that
// tool's arguments to any JSON object, so that the calls still parse and the
// request of a client whose tools use such keywords (agent CLIs, MCP
// servers) is served; a freeform tool whose grammar uses a construct the
// translation refuses (a lookaround, an anchor) takes any text as its input
// there. A schema that is malformed or past the converter's limits, and a
// grammar that does not parse, are refused under every choice.
func CompileToolChoice(r *backends.Request) error {
	var tools []grammar.Tool
	for _, t := range r.Tools {
		if r.ToolChoice.Mode == backends.ToolChoiceFunction && t.Name != r.ToolChoice.Name {
			continue
		}
		gt := grammar.Tool{Name: t.Name, Parameters: t.Parameters}
		if in := t.Input; in != nil && in.Syntax != "" {
			in := *in
			gt.Input = func(root, prefix string) (string, error) { return freeformRules(in, root, prefix) }
		}
		tools = append(tools, gt)
	}
	auto := r.ToolChoice.Mode == "" || r.ToolChoice.Mode == backends.ToolChoiceAuto
	for range len(tools) + 1 {
		g, err := grammar.ToolCall(tools, grammar.Options{})
		if err == nil {
			r.ToolChoice.Grammar = g
			return nil
		}
		i := unsupportedTool(err, tools)
		if !auto || i < 0 {
			return toolSchemaError(err)
		}
		if tools[i].Input != nil {
			tools[i].Input = nil // a freeform tool: its input any text
			tools[i].Parameters = backends.FreeformParameters
			continue
		}
		tools[i].Parameters = anyObject
	}
	return errors.New("llama: tool grammar: relaxing the unsupported schemas did not converge")
}

// anyObject is the arguments schema of a tool relaxed under auto.
var anyObject = json.RawMessage(`{"type":"object"}`)

// unsupportedTool is the index in tools of the tool whose schema err says
// uses a keyword the grammar cannot enforce, or -1 when err is another error
// (or names a tool already relaxed).
func unsupportedTool(err error, tools []grammar.Tool) int {
	var te *grammar.ToolError
	var ue *grammar.UnsupportedError
	var le *lark.UnsupportedError
	if !errors.As(err, &te) {
		return -1
	}
	freeform := errors.As(te.Err, &le)
	if !freeform && !errors.As(te.Err, &ue) {
		return -1
	}
	for i, t := range tools {
		if t.Name != te.Tool {
			continue
		}
		if freeform && t.Input != nil || !freeform && t.Input == nil && !bytes.Equal(t.Parameters, anyObject) {
			return i
		}
	}
	return -1
}

// freeformRules are the GBNF rules of a freeform tool's input text, written
// as the body of a JSON string (the call carries it as {"input": "..."}).
func freeformRules(in backends.ToolInput, root, prefix string) (string, error) {
	opts := lark.Options{Root: root, Prefix: prefix, JSONString: true}
	switch in.Syntax {
	case "lark":
		return lark.Translate(in.Definition, opts)
	case "regex":
		g, err := lark.Regex(in.Definition, "")
		if err != nil {
			return "", err
		}
		return g.GBNF(opts)
	}
	return "", fmt.Errorf("grammar syntax %q is not lark or regex", in.Syntax)
}

// toolSchemaError is the refusal of a tool's parameters schema (or
// grammar) the converter refused.
func toolSchemaError(err error) error {
	var te *grammar.ToolError
	if !errors.As(err, &te) {
		return &backends.SchemaError{Kind: backends.SchemaOfTool, Reason: err.Error(), Err: err}
	}
	var ue *lark.UnsupportedError
	var se *lark.SyntaxError
	if errors.As(te.Err, &ue) || errors.As(te.Err, &se) {
		return &backends.SchemaError{Kind: backends.GrammarOfTool, Tool: te.Tool, Err: err,
			Reason: strings.TrimPrefix(te.Err.Error(), "lark: ")}
	}
	se2 := schemaError(te.Err)
	se2.Kind, se2.Tool, se2.Err = backends.SchemaOfTool, te.Tool, err
	return se2
}
