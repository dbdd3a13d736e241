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
		if err := backends.CompileResponseFormat(Constraints{}, &f); err != nil || !strings.HasPrefix(f.Grammar, "root ::=") {
			t.Errorf("%s: %v, grammar %q", f.Type, err, f.Grammar)
		}
	}
	text := backends.ResponseFormat{Type: backends.FormatText, Grammar: "stale"}
	if err := backends.CompileResponseFormat(Constraints{}, &text); err != nil || text.Grammar != "" {
		t.Errorf("text: %v, grammar %q", err, text.Grammar)
	}
	for schema, want := range map[string]string{
		`{"type":"object","properties":{"a":{"not":{"type":"null"}}}}`: `the keyword "not" (at /properties/a) is not supported`,
		`{"type":"integer","multipleOf":2}`:                            `the keyword "multipleOf" (at the schema's root)`,
		`{"type":"wizard"}`:                                            "is invalid at",
		``:                                                             "needs a schema",
	} {
		f := backends.ResponseFormat{Type: backends.FormatJSONSchema, Schema: []byte(schema)}
		err := backends.CompileResponseFormat(Constraints{}, &f)
		var se *backends.SchemaError
		if !errors.As(err, &se) || se.Kind != backends.SchemaOfFormat || !strings.Contains(se.Reason, want) || f.Grammar != "" {
			t.Errorf("%s: %v, want a schema refusal containing %q", schema, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "response_format") {
			t.Errorf("%s: %q names a dialect's field", schema, err)
		}
	}
}
