package llama

import (
	"errors"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends"
)

// TestCompileResponseFormat: the registered compiler gives json_object and
// json_schema a grammar rooted at root, clears it for text, and refuses an
// unenforceable keyword, a malformed schema and a missing schema as bad
// requests on response_format that say what is wrong.
func TestCompileResponseFormat(t *testing.T) {
	for _, f := range []backends.ResponseFormat{
		{Type: backends.FormatJSONObject},
		{Type: backends.FormatJSONSchema, Schema: []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)},
	} {
		if err := backends.CompileResponseFormat(&f); err != nil || !strings.HasPrefix(f.Grammar, "root ::=") {
			t.Errorf("%s: %v, grammar %q", f.Type, err, f.Grammar)
		}
	}
	text := backends.ResponseFormat{Type: backends.FormatText, Grammar: "stale"}
	if err := backends.CompileResponseFormat(&text); err != nil || text.Grammar != "" {
		t.Errorf("text: %v, grammar %q", err, text.Grammar)
	}
	for schema, want := range map[string]string{
		`{"type":"object","properties":{"a":{"not":{"type":"null"}}}}`: `the keyword "not" (at /properties/a) is not supported`,
		`{"type":"integer","multipleOf":2}`:                            `the keyword "multipleOf" (at the schema's root)`,
		`{"type":"wizard"}`:                                            "is invalid at",
		``:                                                             "needs json_schema.schema",
	} {
		f := backends.ResponseFormat{Type: backends.FormatJSONSchema, Schema: []byte(schema)}
		err := backends.CompileResponseFormat(&f)
		var br *backends.BadRequestError
		if !errors.As(err, &br) || br.Param != "response_format" || !strings.Contains(br.Message, want) || f.Grammar != "" {
			t.Errorf("%s: %v, want a bad request on response_format containing %q", schema, err, want)
		}
	}
}
