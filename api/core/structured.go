package core

import (
	"encoding/json"

	"github.com/modeld/modeld/backends"
)

// WireResponseFormat is the response_format of the chat and completions
// APIs.
type WireResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict bool            `json:"strict"`
	} `json:"json_schema"`
}

// ResponseFormat reads rf (nil: free text) into gen.ResponseFormat and has
// the backends' format compiler derive its grammar. It runs while the
// request is checked, before any model is acquired, so a schema that cannot
// be enforced is a 400 on response_format naming the keyword, and nothing
// loads.
func ResponseFormat(rf *WireResponseFormat, gen *backends.Request, n FieldNames, c backends.Constrainer) error {
	if rf == nil {
		return nil
	}
	switch t := backends.ResponseFormatType(rf.Type); t {
	case "", backends.FormatText, backends.FormatJSONObject:
		gen.ResponseFormat = backends.ResponseFormat{Type: t}
	case backends.FormatJSONSchema:
		if rf.JSONSchema == nil {
			return BadRequest("response_format", "response_format json_schema needs a json_schema object")
		}
		gen.ResponseFormat = backends.ResponseFormat{Type: t, Name: rf.JSONSchema.Name, Schema: rf.JSONSchema.Schema, Strict: rf.JSONSchema.Strict}
	default:
		return BadRequest("response_format", "response_format type %s is not one of text, json_object, json_schema", Quote(rf.Type))
	}
	if err := backends.CompileResponseFormat(c, &gen.ResponseFormat); err != nil {
		return schemaRefusal(err, n)
	}
	return nil
}

// ToolGrammar has the backends' tool compiler derive gen's call grammar.
func ToolGrammar(gen *backends.Request, n FieldNames, c backends.Constrainer) error {
	if err := backends.CompileToolChoice(c, gen); err != nil {
		return schemaRefusal(err, n)
	}
	return nil
}
