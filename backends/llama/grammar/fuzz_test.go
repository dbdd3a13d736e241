package grammar

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzFromSchema: any input converts or fails with ErrSchema, never
// panics, and a grammar stays within MaxBytes, starts at the root rule and
// compiles in llama.cpp's parser.
func FuzzFromSchema(f *testing.F) {
	for _, sc := range schemaCases {
		f.Add([]byte(sc.schema))
	}
	for _, s := range []string{
		`{"$ref":"#"}`, `{"anyOf":[{"$ref":"#"}]}`, `{"type":"string","pattern":"^(a|b{2,3})*[^x-z]\\d+$"}`,
		`{"type":"integer","minimum":-1e30}`, `{"enum":[{"a":[1,{"b":null}]},"\u0000"]}`, `{"properties":{"\"\\":{}}}`,
		`{"type":"object","additionalProperties":{"$ref":"#"}}`, `{"type":"string","pattern":"[\\]\\-\\\\^]"}`,
		`{"oneOf":[{"const":1,"enum":5},{"enum":"x","const":2}]}`, `{"oneOf":[{"$ref":"#"},{"$ref":"#/oneOf/0"}]}`,
	} {
		f.Add([]byte(s))
	}
	lim := Limits{}.withDefaults()
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := FromSchema(json.RawMessage(data), Options{})
		if err != nil {
			if !errors.Is(err, ErrSchema) {
				t.Fatalf("error outside ErrSchema: %v", err)
			}
			return
		}
		if len(g) > lim.MaxBytes {
			t.Fatalf("grammar of %d bytes", len(g))
		}
		if !strings.HasPrefix(g, RootRule+" ::= ") {
			t.Fatalf("grammar does not start at the root:\n%s", g)
		}
		if !compiles(t, g) {
			t.Fatalf("llama.cpp rejects the grammar for %q:\n%s", data, g)
		}
	})
}
