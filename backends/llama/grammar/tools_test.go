package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var weatherTools = []Tool{
	{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}`)},
	{Name: "add", Parameters: json.RawMessage(`{"type":"object","$defs":{"n":{"type":"integer","minimum":0,"maximum":99}},"properties":{"a":{"$ref":"#/$defs/n"},"b":{"$ref":"#/$defs/n"}},"required":["a","b"],"additionalProperties":false}`)},
	{Name: "now"},
}

// TestToolCallSamplesValid samples a random-weight model under the call
// grammar of three tools (one with $ref into its own $defs, one without
// parameters) and checks every output is one call of a tool by name whose
// arguments validate against that tool's schema.
func TestToolCallSamplesValid(t *testing.T) {
	g, err := ToolCall(weatherTools, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check := map[string]*jsonschema.Schema{}
	for _, tl := range weatherTools {
		s := string(tl.Parameters)
		if s == "" {
			s = `{"type":"object"}`
		}
		check[tl.Name] = validator(t, tl.Name, s)
	}
	for _, seed := range []uint32{1, 2, 3, 4, 5, 6} {
		out, done := generateClosing(t, g, seed)
		if !done {
			t.Fatalf("seed %d: no end within %d tokens: %q", seed, maxSampleTokens, out)
		}
		var call struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal([]byte(out), &call); err != nil {
			t.Fatalf("seed %d: not a call object: %v\n%q", seed, err, out)
		}
		v, ok := check[call.Name]
		if !ok {
			t.Fatalf("seed %d: call of unknown tool %q: %q", seed, call.Name, out)
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(call.Arguments)))
		if err != nil {
			t.Fatalf("seed %d: arguments not JSON: %v", seed, err)
		}
		if err := v.Validate(inst); err != nil {
			t.Fatalf("seed %d: arguments fail %s's schema: %v\n%q", seed, call.Name, err, out)
		}
	}
}

// TestToolCallUnsupportedNamesTool checks a tool schema the converter
// cannot enforce is a *ToolError naming the tool, wrapping the keyword.
func TestToolCallUnsupportedNamesTool(t *testing.T) {
	_, err := ToolCall([]Tool{weatherTools[0], {Name: "bad", Parameters: json.RawMessage(`{"type":"object","patternProperties":{"^x":{}}}`)}}, Options{})
	var te *ToolError
	var ue *UnsupportedError
	if !errors.As(err, &te) || te.Tool != "bad" || !errors.As(err, &ue) || ue.Keyword != "patternProperties" || !errors.Is(err, ErrSchema) {
		t.Fatalf("err = %v", err)
	}
	if _, err := ToolCall(nil, Options{}); err == nil {
		t.Fatal("no tools: no error")
	}
}

// TestToolCallNamesParts checks the grammar names each tool's parts and
// the object's keys, one rule a line, so a backend can write another call
// syntax around them.
func TestToolCallNamesParts(t *testing.T) {
	g, err := ToolCall(weatherTools, Options{})
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(g), "\n") {
		name, body, ok := strings.Cut(l, " ::= ")
		if !ok {
			t.Fatalf("line %q is not a rule", l)
		}
		lines[name] = body
	}
	for name, want := range map[string]string{
		"root": "call-0 | call-1 | call-2", "call-name-key": `"\"name\""`, "call-args-key": `"\"arguments\""`,
		"call-name-1": `"\"add\""`, "call-fname-1": `"add"`, "call-fname-2": `"now"`,
	} {
		if lines[name] != want {
			t.Errorf("%s ::= %q, want %q", name, lines[name], want)
		}
	}
	for i := range weatherTools {
		if lines[fmt.Sprintf("call-args-%d", i)] == "" || !strings.Contains(lines[fmt.Sprintf("call-%d", i)], fmt.Sprintf("call-args-%d", i)) {
			t.Errorf("tool %d: call-args-%d %q, call-%d %q", i, i, lines[fmt.Sprintf("call-args-%d", i)], i, lines[fmt.Sprintf("call-%d", i)])
		}
	}
}
