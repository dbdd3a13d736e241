package llama

import (
	"errors"
	"fmt"
	"strings"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/grammar"
)

func init() { backends.RegisterToolCompiler(CompileToolChoice) }

// CompileToolChoice writes to r.ToolChoice.Grammar the GBNF grammar of one
// call object of the tools r.ToolChoice allows (all of them; under a named
// function that one), each tool's arguments under its parameters schema;
// the engine wraps it in the template family's call syntax. A schema the
// converter refuses is a *backends.BadRequestError on tools naming the tool
// and the keyword at its path, under every tool choice that offers tools:
// under auto too, since the schema would still be in the prompt with the
// calls unconstrained.
func CompileToolChoice(r *backends.Request) error {
	var tools []grammar.Tool
	for _, t := range r.Tools {
		if r.ToolChoice.Mode == backends.ToolChoiceFunction && t.Name != r.ToolChoice.Name {
			continue
		}
		tools = append(tools, grammar.Tool{Name: t.Name, Parameters: t.Parameters})
	}
	g, err := grammar.ToolCall(tools, grammar.Options{})
	if err != nil {
		return toolSchemaError(err)
	}
	r.ToolChoice.Grammar = g
	return nil
}

// toolSchemaError is the bad request for a tool's parameters schema the
// converter refused.
func toolSchemaError(err error) error {
	var te *grammar.ToolError
	if !errors.As(err, &te) {
		return &backends.BadRequestError{Param: "tools", Message: "tools: " + err.Error(), Err: err}
	}
	br := schemaError(te.Err).(*backends.BadRequestError)
	br.Param = "tools"
	br.Message = fmt.Sprintf("tools: function %s's parameters%s", backends.QuoteInput(te.Tool), strings.TrimPrefix(br.Message, "response_format json_schema"))
	return br
}
