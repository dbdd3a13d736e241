package backends

import (
	"errors"
	"testing"
)

// TestCompileResponseFormatWithoutCompiler: with no backend's compiler
// registered (none is in this package's tests), free text passes and a
// structured format is a bad request on response_format, never ignored.
func TestCompileResponseFormatWithoutCompiler(t *testing.T) {
	text := ResponseFormat{Type: FormatText, Grammar: "stale"}
	if err := CompileResponseFormat(&text); err != nil || text.Grammar != "" {
		t.Fatalf("text: %v, grammar %q", err, text.Grammar)
	}
	for _, f := range []ResponseFormat{{Type: FormatJSONObject}, {Type: FormatJSONSchema, Schema: []byte(`{}`)}} {
		err := CompileResponseFormat(&f)
		var br *BadRequestError
		if !errors.As(err, &br) || br.Param != "response_format" || f.Grammar != "" {
			t.Errorf("%s: %v", f.Type, err)
		}
	}
}
