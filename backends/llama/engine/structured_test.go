package engine

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/grammar"
	"github.com/modeld/modeld/internal/ggufgen"
)

// structuredSchemas are the schemas the engine-level tests sample under.
var structuredSchemas = []struct{ name, schema string }{
	{"person", `{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false}`},
	{"enum-array", `{"type":"object","properties":{"tags":{"type":"array","items":{"enum":["a","b","c"]},"minItems":1,"maxItems":4},"ok":{"type":"boolean"}},"required":["tags","ok"],"additionalProperties":false}`},
	{"nested", `{"type":"object","properties":{"point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"],"additionalProperties":false},"label":{"anyOf":[{"type":"string","pattern":"^[a-z]{1,6}$"},{"type":"null"}]}},"required":["point","label"],"additionalProperties":false}`},
	{"date", `{"type":"object","properties":{"when":{"type":"string","format":"date"},"n":{"type":"integer","exclusiveMinimum":-5,"maximum":5}},"required":["when","n"],"additionalProperties":false}`},
}

// closingBias favours the tokens holding a quote or a closing bracket, so
// that the random-weight model's walks through strings and arrays end: a
// bias changes how likely an allowed token is, never what the grammar
// allows.
func closingBias(m *Model) map[int32]float32 {
	bias := map[int32]float32{}
	for id := 0; id < m.nVocab; id++ {
		if strings.ContainsAny(m.piece(yz.Token(id), false), "\"}]") {
			bias[int32(id)] = 6
		}
	}
	return bias
}

func schemaValidator(t *testing.T, name, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	url := "mem://" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	v, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestStructuredJSONSchema samples the random-weight model under each
// schema's grammar, with several seeds and greedily, through Generate and
// the scheduler: every output parses and validates against its schema, and
// every generation ends on its own (an end-of-generation token the grammar
// allowed only once complete), not at the token limit.
func TestStructuredJSONSchema(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.BPE), Options{Slots: 2, ContextSize: 1024})
	bias := closingBias(m)
	if len(bias) == 0 {
		t.Fatal("no closing tokens in the vocabulary")
	}
	prompt := tokenize(t, m, "Answer in JSON:")
	for _, sc := range structuredSchemas {
		t.Run(sc.name, func(t *testing.T) {
			g, err := grammar.FromSchema(json.RawMessage(sc.schema), grammar.Options{})
			if err != nil {
				t.Fatal(err)
			}
			v := schemaValidator(t, sc.name, sc.schema)
			for _, seed := range []int64{-1, 1, 2, 3} {
				samp := Sampling{LogitBias: bias}
				if seed >= 0 {
					samp.Temperature, samp.Seed = 1, &seed
				}
				res := generate(t, m, Request{Prompt: prompt, MaxTokens: 900, Sampling: samp,
					ResponseFormat: backends.ResponseFormat{Type: backends.FormatJSONSchema, Schema: json.RawMessage(sc.schema), Grammar: g}})
				if res.final.Finish != FinishStop {
					t.Fatalf("seed %d: finish %q after %d tokens, want stop: %q", seed, res.final.Finish, len(res.tokens), res.text)
				}
				inst, err := jsonschema.UnmarshalJSON(strings.NewReader(res.text))
				if err != nil {
					t.Fatalf("seed %d: output is not JSON: %v\n%q", seed, err, res.text)
				}
				t.Logf("seed %d: %d tokens: %s", seed, len(res.tokens), res.text)
				if err := v.Validate(inst); err != nil {
					t.Fatalf("seed %d: output fails the schema: %v\n%q", seed, err, res.text)
				}
			}
		})
	}
}

// TestStructuredJSONObject: under the json_object grammar every output is
// a JSON object, and the same prompt without a grammar is not (so the
// grammar, not the model, made it one).
func TestStructuredJSONObject(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.BPE), Options{Slots: 1, ContextSize: 1024})
	bias := closingBias(m)
	prompt := tokenize(t, m, "Answer in JSON:")
	for _, seed := range []int64{1, 2, 3} {
		samp := Sampling{Temperature: 1, Seed: &seed, LogitBias: bias}
		res := generate(t, m, Request{Prompt: prompt, MaxTokens: 900, Sampling: samp,
			ResponseFormat: backends.ResponseFormat{Type: backends.FormatJSONObject, Grammar: grammar.JSONObject()}})
		if res.final.Finish != FinishStop {
			t.Fatalf("seed %d: finish %q, want stop: %q", seed, res.final.Finish, res.text)
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(res.text), &obj); err != nil {
			t.Fatalf("seed %d: output is not a JSON object: %v\n%q", seed, err, res.text)
		}
		free := generate(t, m, Request{Prompt: prompt, MaxTokens: 64, Sampling: samp})
		if json.Unmarshal([]byte(free.text), &obj) == nil {
			t.Fatalf("seed %d: the unconstrained output is a JSON object too: %q", seed, free.text)
		}
	}
}

// TestStructuredRefused: a structured format without its grammar, and a
// grammar llama.cpp's parser refuses, are bad requests on response_format.
func TestStructuredRefused(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.BPE), Options{Slots: 1})
	prompt := tokenize(t, m, "x")
	for i, f := range []backends.ResponseFormat{
		{Type: backends.FormatJSONObject},
		{Type: backends.FormatJSONSchema, Schema: json.RawMessage(`{"type":"string"}`)},
		{Type: backends.FormatJSONSchema, Schema: json.RawMessage(`{"type":"string"}`), Grammar: "root ::= ("},
	} {
		_, err := m.Generate(t.Context(), Request{Prompt: prompt, MaxTokens: 4, ResponseFormat: f})
		var br *backends.BadRequestError
		if !errors.As(err, &br) || br.Param != "response_format" {
			t.Errorf("case %d: err = %v, want a bad request on response_format", i, err)
		}
	}
}

// TestStructuredEndOnlyWhenComplete: the end-of-generation token is masked
// until the grammar is complete and is the only token allowed after it.
// With the end token all but forced (bias +100) the output is still the
// whole constant, and the generation then stops at once.
func TestStructuredEndOnlyWhenComplete(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.BPE), Options{Slots: 1})
	const want = `"the quick brown fox jumps over the lazy dog"`
	g, err := grammar.FromSchema(json.RawMessage(`{"const":`+want+`}`), grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eos := int32(yz.VocabEOS(m.vocab))
	for _, seed := range []int64{1, 2} {
		samp := Sampling{Temperature: 1, Seed: &seed, LogitBias: map[int32]float32{eos: 100}}
		res := generate(t, m, Request{Prompt: tokenize(t, m, "x"), MaxTokens: 200, Sampling: samp,
			ResponseFormat: backends.ResponseFormat{Type: backends.FormatJSONSchema, Grammar: g}})
		if res.text != want || res.final.Finish != FinishStop {
			t.Fatalf("seed %d: %q (%s), want %q (stop)", seed, res.text, res.final.Finish, want)
		}
		// Free, the same bias ends the generation at the first token.
		free := generate(t, m, Request{Prompt: tokenize(t, m, "x"), MaxTokens: 200, Sampling: samp})
		if free.final.Finish != FinishStop || len(free.tokens) != 0 {
			t.Fatalf("seed %d: without the grammar %d tokens (%s): the bias does not force the end", seed, len(free.tokens), free.final.Finish)
		}
	}
}
