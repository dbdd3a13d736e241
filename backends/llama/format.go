package llama

import (
	"errors"
	"fmt"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/grammar"
)

// Constraints is llama.cpp's grammar sampling as a backends.Constrainer:
// the compilers of this package. The daemon hands it to the dialects; a
// loaded model (Loaded) has the same.
type Constraints struct{}

var _ backends.Constrainer = Constraints{}

// CompileResponseFormat is the package's CompileResponseFormat.
func (Constraints) CompileResponseFormat(f *backends.ResponseFormat) error {
	return CompileResponseFormat(f)
}

// CompileToolChoice is the package's CompileToolChoice.
func (Constraints) CompileToolChoice(r *backends.Request) error { return CompileToolChoice(r) }

// CompileResponseFormat writes the GBNF grammar of a json_object or
// json_schema response format to f.Grammar (package grammar converts the
// schema); the engine's sampler chain enforces it token by token. A schema
// the converter refuses is a *backends.SchemaError that names the keyword
// (or the bound, or what is malformed) and where.
func CompileResponseFormat(f *backends.ResponseFormat) error {
	switch f.Type {
	case backends.FormatJSONObject:
		f.Grammar = grammar.JSONObject()
		return nil
	case backends.FormatJSONSchema:
		if len(f.Schema) == 0 || string(f.Schema) == "null" {
			return formatError("a json_schema format needs a schema")
		}
		g, err := grammar.FromSchema(f.Schema, grammar.Options{})
		if err != nil {
			return schemaError(err)
		}
		f.Grammar = g
		return nil
	case "", backends.FormatText:
		f.Grammar = ""
		return nil
	}
	return formatError(fmt.Sprintf("the format type %s is not one of text, json_object, json_schema", backends.QuoteInput(string(f.Type))))
}

func formatError(msg string) error {
	return &backends.SchemaError{Kind: backends.SchemaOfFormat, Reason: msg}
}

// schemaError is the refusal of a schema grammar.FromSchema refused.
func schemaError(err error) *backends.SchemaError {
	var unsup *grammar.UnsupportedError
	var inval *grammar.InvalidError
	var limit *grammar.LimitError
	at := func(path string) string {
		if path == "" {
			return "the schema's root"
		}
		return path
	}
	switch {
	case errors.As(err, &unsup):
		msg := fmt.Sprintf("the keyword %s (at %s) is not supported", backends.QuoteInput(unsup.Keyword), at(unsup.Path))
		if unsup.Reason != "" {
			msg += ": " + unsup.Reason
		}
		return &backends.SchemaError{Reason: msg, Err: err}
	case errors.As(err, &inval):
		return &backends.SchemaError{Err: err, Reason: fmt.Sprintf("the schema is invalid at %s: %s", at(inval.Path), inval.Reason)}
	case errors.As(err, &limit):
		return &backends.SchemaError{Err: err, Reason: fmt.Sprintf("the schema is too large at %s: over the %s bound of %d", at(limit.Path), limit.Limit, limit.Max)}
	}
	return &backends.SchemaError{Reason: err.Error(), Err: err}
}
