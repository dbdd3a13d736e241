package grammar_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modeld/modeld/backends/llama/grammar"
)

func ExampleFromSchema() {
	schema := json.RawMessage(`{"type":"object","properties":{"unit":{"enum":["c","f"]}},"required":["unit"],"additionalProperties":false}`)
	g, err := grammar.FromSchema(schema, grammar.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(g)

	_, err = grammar.FromSchema(json.RawMessage(`{"type":"integer","multipleOf":5}`), grammar.Options{})
	var ue *grammar.UnsupportedError
	fmt.Println(errors.Is(err, grammar.ErrSchema), errors.As(err, &ue) && ue.Keyword == "multipleOf")
	// Output:
	// root ::= s-object
	// space ::= | " " | "\n" [ \t]{0,20}
	// s-properties-unit-enum ::= ("\"c\"" | "\"f\"") space
	// s-object ::= "{" space "\"unit\"" space ":" space s-properties-unit-enum "}" space
	// true true
}
