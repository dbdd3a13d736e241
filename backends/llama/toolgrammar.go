package llama

import (
	"errors"
	"fmt"
	"strings"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/grammar"
	"github.com/modeld/modeld/backends/llama/grammar/lark"
)

func init() { backends.RegisterToolCompiler(CompileToolChoice) }

// CompileToolChoice writes to r.ToolChoice.Grammar the GBNF grammar of one
// call object of the tools r.ToolChoice allows (all of them; under a named
// function that one), each tool's arguments under its parameters schema;
// the engine wraps it in the template family's call syntax. Under required
// or a named function a schema the converter refuses is a
// *backends.BadRequestError on tools naming the tool and the keyword;
// under auto the calls are then left unconstrained (no grammar).
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
	g, err := grammar.ToolCall(tools, grammar.Options{})
	if err != nil {
		if r.ToolChoice.Mode == "" || r.ToolChoice.Mode == backends.ToolChoiceAuto {
			r.ToolChoice.Grammar = ""
			return nil
		}
		return toolSchemaError(err)
	}
	r.ToolChoice.Grammar = g
	return nil
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

// toolSchemaError is the bad request for a tool's parameters schema the
// converter refused.
func toolSchemaError(err error) error {
	var te *grammar.ToolError
	if !errors.As(err, &te) {
		return &backends.BadRequestError{Param: "tools", Message: "tools: " + err.Error(), Err: err}
	}
	var ue *lark.UnsupportedError
	var se *lark.SyntaxError
	if errors.As(te.Err, &ue) || errors.As(te.Err, &se) {
		return &backends.BadRequestError{Param: "tools", Err: err,
			Message: fmt.Sprintf("tools: tool %s's grammar: %s", backends.QuoteInput(te.Tool), strings.TrimPrefix(te.Err.Error(), "lark: "))}
	}
	br := schemaError(te.Err).(*backends.BadRequestError)
	br.Param = "tools"
	br.Message = fmt.Sprintf("tools: function %s's parameters%s", backends.QuoteInput(te.Tool), strings.TrimPrefix(br.Message, "response_format json_schema"))
	return br
}
