package backends

import (
	"errors"
	"testing"
)

// TestCompileResponseFormatWithoutCompiler: with no backend's compiler,
// free text passes and a
// structured format is a schema refusal, never ignored.
func TestCompileResponseFormatWithoutCompiler(t *testing.T) {
	text := ResponseFormat{Type: FormatText, Grammar: "stale"}
	if err := CompileResponseFormat(nil, &text); err != nil || text.Grammar != "" {
		t.Fatalf("text: %v, grammar %q", err, text.Grammar)
	}
	for _, f := range []ResponseFormat{{Type: FormatJSONObject}, {Type: FormatJSONSchema, Schema: []byte(`{}`)}} {
		err := CompileResponseFormat(nil, &f)
		var se *SchemaError
		if !errors.As(err, &se) || se.Kind != SchemaOfFormat || f.Grammar != "" {
			t.Errorf("%s: %v", f.Type, err)
		}
	}
}
