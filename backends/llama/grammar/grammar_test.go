package grammar

import (
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// seeds are the draws each schema is sampled with.
var seeds = []uint32{1, 2, 3}

// maxSampleTokens bounds one generation; every sample must end before it.
const maxSampleTokens = 2000

// validator compiles schema for checking outputs, formats asserted.
func validator(t *testing.T, name, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	url := "mem://" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s: validator rejects the schema: %v", name, err)
	}
	return s
}

// TestSchemasSampleValid converts every schema of the table, has
// llama.cpp's grammar parser compile the grammar, samples a random-weight
// model under it with several seeds, and validates every output against
// the schema: with random weights only the grammar makes them valid.
func TestSchemasSampleValid(t *testing.T) {
	if len(schemaCases) < 40 {
		t.Fatalf("only %d schemas in the table", len(schemaCases))
	}
	for _, sc := range schemaCases {
		t.Run(sc.name, func(t *testing.T) {
			g, err := FromSchema(json.RawMessage(sc.schema), Options{})
			if err != nil {
				t.Fatal(err)
			}
			check := sc.schema
			if sc.check != "" {
				check = sc.check
			}
			v := validator(t, sc.name, check)
			for _, seed := range seeds {
				out, done := generateClosing(t, g, seed)
				if !done {
					t.Fatalf("seed %d: no end within %d tokens: %q", seed, maxSampleTokens, out)
				}
				inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
				if err != nil {
					t.Fatalf("seed %d: output is not JSON: %v\n%q\ngrammar:\n%s", seed, err, out, g)
				}
				if err := v.Validate(inst); err != nil {
					t.Fatalf("seed %d: output fails the schema: %v\n%q\ngrammar:\n%s", seed, err, out, g)
				}
			}
		})
	}
}

// TestJSONObjectSamples checks json_object mode: every output is an object.
func TestJSONObjectSamples(t *testing.T) {
	g := JSONObject()
	for _, seed := range seeds {
		out, done := generateClosing(t, g, seed)
		if !done {
			t.Fatalf("seed %d: no end within %d tokens", seed, maxSampleTokens)
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(out), &obj); err != nil {
			t.Fatalf("seed %d: not a JSON object: %v\n%q", seed, err, out)
		}
	}
}

// closers are the tokens holding a closing quote, brace or bracket.
func closers(vocab yz.Vocab) []yz.LogitBias {
	n := yz.VocabNTokens(vocab)
	buf := make([]byte, 256)
	var out []yz.LogitBias
	for id := int32(0); id < n; id++ {
		k := yz.TokenToPiece(vocab, yz.Token(id), buf, 0, false)
		if k > 0 && strings.ContainsAny(string(buf[:k]), "\"}]") {
			out = append(out, yz.LogitBias{Token: yz.Token(id), Bias: 6})
		}
	}
	return out
}

// generateClosing samples under g with a bias toward closing tokens, so
// that random walks through long strings end: the bias changes how likely
// an allowed token is, never what the grammar allows.
func generateClosing(t *testing.T, g string, seed uint32) (string, bool) {
	t.Helper()
	_, vocab := tinyModel(t)
	bias := closers(vocab)
	if len(bias) == 0 {
		t.Fatal("no closing tokens in the vocabulary")
	}
	extra := func(chain yz.Sampler) {
		yz.SamplerChainAdd(chain, yz.SamplerInitLogitBias(yz.VocabNTokens(vocab), int32(len(bias)), &bias[0]))
		runtime.KeepAlive(bias)
	}
	return generateWith(t, g, seed, maxSampleTokens, extra)
}

// TestGrammarsCompile has llama.cpp's parser compile each grammar (the
// sampling test does too; this one names a parse failure plainly).
func TestGrammarsCompile(t *testing.T) {
	for _, sc := range schemaCases {
		g, err := FromSchema(json.RawMessage(sc.schema), Options{})
		if err != nil {
			t.Errorf("%s: %v", sc.name, err)
			continue
		}
		if !compiles(t, g) {
			t.Errorf("%s: llama.cpp rejects the grammar:\n%s", sc.name, g)
		}
	}
	if !compiles(t, JSONObject()) {
		t.Error("json_object grammar rejected")
	}
	if compiles(t, "root ::= (") {
		t.Error("a broken grammar compiled: the check proves nothing")
	}
}

// TestUnsupportedKeywords: a keyword the grammar cannot enforce is an
// error naming it, matching ErrSchema.
func TestUnsupportedKeywords(t *testing.T) {
	cases := []struct {
		schema, keyword string
	}{
		{`{"type":"object","not":{"required":["a"]}}`, "not"},
		{`{"type":"integer","multipleOf":3}`, "multipleOf"},
		{`{"type":"array","items":{"type":"integer"},"uniqueItems":true}`, "uniqueItems"},
		{`{"type":"object","patternProperties":{"^x":{}}}`, "patternProperties"},
		{`{"type":"object","minProperties":1}`, "minProperties"},
		{`{"type":"object","properties":{"a":{"type":"string","format":"ipv6"}}}`, "format"},
		{`{"if":{"type":"string"},"then":{"maxLength":3}}`, "if"},
		{`{"type":"object","dependentRequired":{"a":["b"]}}`, "dependentRequired"},
		{`{"type":"array","contains":{"type":"integer"}}`, "contains"},
		{`{"type":"string","pattern":"^(?=a)b$"}`, "pattern"},
		{`{"type":"string","pattern":"^a+?$"}`, "pattern"},
		{`{"type":"string","pattern":"(a)\\1"}`, "pattern"},
		{`{"type":"string","pattern":"a^b"}`, "pattern"},
		{`{"type":"string","pattern":"\\bword"}`, "pattern"},
		{`{"type":"string","pattern":"^a|b"}`, "pattern"},
		{`{"type":"string","pattern":"^a$","format":"date"}`, "pattern"},
		{`{"type":"string","pattern":"^a*$","maxLength":3}`, "maxLength"},
		{`{"type":"number","minimum":0.5}`, "minimum"},
		{`{"type":"number","minimum":-3,"maximum":3}`, "minimum"},
		{`{"type":"number","maximum":3}`, "maximum"},
		{`{"$ref":"other.json#/x"}`, "$ref"},
		{`{"enum":["a","b"],"maxLength":1}`, "maxLength"},
		{`{"allOf":[{"type":"object","properties":{"a":{}},"additionalProperties":false},{"properties":{"b":{}}}]}`, "allOf"},
		{`{"allOf":[{"type":"string","maxLength":3},{"type":"string","maxLength":4}]}`, "allOf"},
		{`{"type":"object","propertyNames":{"maxLength":3}}`, "propertyNames"},
		{`{"type":"object","unevaluatedProperties":false}`, "unevaluatedProperties"},
		{`{"type":"string","frobnicate":1}`, "frobnicate"},
		{`{"type":"integer","format":"uint8"}`, "format"},
		{`{"oneOf":[{"type":"string"},{"type":"string","maxLength":3}]}`, "oneOf"},
		{`{"oneOf":[{"type":"number"},{"type":"integer"}]}`, "oneOf"},
		{`{"oneOf":[{"type":"object","properties":{"k":{"const":"a"}}},{"type":"object","properties":{"k":{"const":"b"}}}]}`, "oneOf"},
	}
	for _, c := range cases {
		_, err := FromSchema(json.RawMessage(c.schema), Options{})
		var ue *UnsupportedError
		if !errors.As(err, &ue) {
			t.Errorf("%s: got %v, want an UnsupportedError", c.schema, err)
			continue
		}
		if ue.Keyword != c.keyword {
			t.Errorf("%s: keyword %q, want %q (%v)", c.schema, ue.Keyword, c.keyword, err)
		}
		if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), `"`+c.keyword+`"`) {
			t.Errorf("%s: %v does not match ErrSchema or name the keyword", c.schema, err)
		}
	}
}

// TestInvalidSchemas: malformed or empty schemas are InvalidErrors.
func TestInvalidSchemas(t *testing.T) {
	for _, s := range []string{
		`not json`, `{"type":"object"} x`, `false`, `42`, `{"type":"nope"}`, `{"type":[]}`,
		`{"enum":[]}`, `{"type":"string","enum":[1,2]}`, `{"type":"integer","minimum":5,"maximum":4}`,
		`{"type":"array","minItems":3,"maxItems":2}`, `{"$ref":"#/$defs/missing"}`,
		`{"type":"object","required":["x"],"additionalProperties":false}`, `{"type":"string","pattern":"(a"}`,
		`{"type":"string","pattern":"[z-a]"}`, `{"a":1,"a":2}`, `{"allOf":[{"type":"string"},{"type":"integer"}]}`,
		`{"type":"array","prefixItems":[{}],"items":false,"minItems":2}`,
	} {
		_, err := FromSchema(json.RawMessage(s), Options{})
		var ie *InvalidError
		if !errors.As(err, &ie) || !errors.Is(err, ErrSchema) {
			t.Errorf("%s: got %v, want an InvalidError", s, err)
		}
	}
}

// TestDescriptiveIgnored: annotations change nothing.
func TestDescriptiveIgnored(t *testing.T) {
	plain, err := FromSchema(json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	annotated, err := FromSchema(json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","title":"T","description":"D",
		"type":"object","properties":{"a":{"type":"integer","description":"n","examples":[1],"default":1,"deprecated":true,"readOnly":true,"x-vendor":1}},"required":["a"],"$comment":"c"}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if plain != annotated {
		t.Errorf("annotations changed the grammar:\n%s\nvs\n%s", plain, annotated)
	}
}

// TestPropertyNamesOfAnyString: propertyNames that accepts every string
// (as JSON Schema generators write it for a map keyed by any string) gives
// the grammar of the object without it; one that constrains the keys stays
// refused (TestUnsupportedKeywords).
func TestPropertyNamesOfAnyString(t *testing.T) {
	plain, err := FromSchema(json.RawMessage(`{"type":"object","additionalProperties":{"type":"string"}}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, names := range []string{`true`, `{}`, `{"type":"string"}`, `{"type":"string","description":"a variable's name"}`} {
		g, err := FromSchema(json.RawMessage(`{"type":"object","propertyNames":`+names+`,"additionalProperties":{"type":"string"}}`), Options{})
		if err != nil || g != plain {
			t.Errorf("propertyNames %s: %v\n%s\nvs\n%s", names, err, g, plain)
		}
	}
	for _, names := range []string{`{"type":"string","pattern":"^[A-Z]+$"}`, `{"enum":["a"]}`, `false`} {
		if _, err := FromSchema(json.RawMessage(`{"type":"object","propertyNames":`+names+`}`), Options{}); err == nil {
			t.Errorf("propertyNames %s was accepted", names)
		}
	}
}

// TestWhitespaceBounded: the space rule admits a bounded run only.
func TestWhitespaceBounded(t *testing.T) {
	g, err := FromSchema(json.RawMessage(`{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(g, "space ::= "+spaceRule+"\n") {
		t.Fatalf("no bounded space rule in:\n%s", g)
	}
	for _, line := range strings.Split(g, "\n") {
		if strings.Contains(line, `[ \t\n]*`) || strings.Contains(line, `" "*`) {
			t.Errorf("unbounded whitespace: %s", line)
		}
	}
}
