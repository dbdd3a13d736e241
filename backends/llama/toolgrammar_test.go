package llama

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends"
)

// TestCompileToolChoice: required gets a grammar with every tool, a named
// function one with that tool only, none and no tools none; a schema that
// cannot be enforced is a 400 on tools naming the tool and the keyword
// under required; under auto that tool's arguments are relaxed to any object,
// and a schema past the converter's limits is a 400 there too.
func TestCompileToolChoice(t *testing.T) {
	tools := []backends.Tool{
		{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
		{Name: "get_time"},
	}
	r := backends.Request{Tools: tools, ToolChoice: backends.ToolChoice{Mode: backends.ToolChoiceRequired}}
	if err := backends.CompileToolChoice(Constraints{}, &r); err != nil {
		t.Fatal(err)
	}
	if g := r.ToolChoice.Grammar; !strings.Contains(g, `get_weather`) || !strings.Contains(g, `get_time`) {
		t.Fatalf("required grammar lacks a tool:\n%s", g)
	}
	r.ToolChoice = backends.ToolChoice{Mode: backends.ToolChoiceFunction, Name: "get_time"}
	if err := backends.CompileToolChoice(Constraints{}, &r); err != nil {
		t.Fatal(err)
	}
	if g := r.ToolChoice.Grammar; strings.Contains(g, `get_weather`) || !strings.Contains(g, `get_time`) {
		t.Fatalf("named grammar is not get_time's only:\n%s", g)
	}
	r.ToolChoice = backends.ToolChoice{Mode: backends.ToolChoiceNone, Grammar: "stale"}
	if err := backends.CompileToolChoice(Constraints{}, &r); err != nil || r.ToolChoice.Grammar != "" {
		t.Fatalf("none: %v %q", err, r.ToolChoice.Grammar)
	}
	bad := append(tools, backends.Tool{Name: "scan", Parameters: json.RawMessage(`{"type":"object","patternProperties":{"^x":{}}}`)})
	r = backends.Request{Tools: bad, ToolChoice: backends.ToolChoice{Mode: backends.ToolChoiceRequired}}
	err := backends.CompileToolChoice(Constraints{}, &r)
	var se *backends.SchemaError
	if !errors.As(err, &se) || se.Kind != backends.SchemaOfTool || se.Tool != "scan" || !strings.Contains(se.Reason, "patternProperties") ||
		strings.Contains(err.Error(), "parameters") {
		t.Fatalf("unsupported keyword under required: %v", err)
	}
	// Under auto the tool that uses it is relaxed to any object: the other
	// tools keep their schemas, and a schema past the limits is still refused.
	for _, mode := range []backends.ToolChoiceMode{backends.ToolChoiceAuto, ""} {
		r.ToolChoice = backends.ToolChoice{Mode: mode}
		if err := backends.CompileToolChoice(Constraints{}, &r); err != nil {
			t.Fatalf("unsupported keyword under tool_choice %q: %v", mode, err)
		}
		if g := r.ToolChoice.Grammar; !strings.Contains(g, `scan`) || !strings.Contains(g, `city`) {
			t.Fatalf("auto grammar lacks the relaxed tool or the others' schemas:\n%s", g)
		}
	}
	if string(bad[2].Parameters) != `{"type":"object","patternProperties":{"^x":{}}}` {
		t.Errorf("relaxing changed the request's tool: %s", bad[2].Parameters)
	}
	deep := strings.Repeat(`{"type":"array","items":`, 100) + `{"type":"string"}` + strings.Repeat(`}`, 100)
	r = backends.Request{Tools: []backends.Tool{{Name: "deep", Parameters: json.RawMessage(`{"type":"object","properties":{"a":` + deep + `}}`)}}}
	if err := backends.CompileToolChoice(Constraints{}, &r); !errors.As(err, &se) || se.Kind != backends.SchemaOfTool || se.Tool != "deep" {
		t.Fatalf("a schema past the limits under auto: %v", err)
	}
}

// TestCompileFreeformTool: a freeform tool's arguments are {"input": TEXT}
// with TEXT under its Lark (or regex) grammar as a JSON string body; a
// grammar construct the translation refuses is a 400 on tools naming the
// tool and the construct when the call is forced; under auto that tool's
// input is any text (the call itself still parses), and a grammar that does
// not parse is a 400 there too.
func TestCompileFreeformTool(t *testing.T) {
	lark := &backends.ToolInput{Syntax: "lark", Definition: "start: \"+\" /[a-z]+/ LF\n%import common.LF"}
	tools := []backends.Tool{{Name: "patch", Parameters: backends.FreeformParameters, Input: lark},
		{Name: "code", Parameters: backends.FreeformParameters, Input: &backends.ToolInput{Syntax: "regex", Definition: `[0-9]{3}`}}}
	r := backends.Request{Tools: tools, ToolChoice: backends.ToolChoice{Mode: backends.ToolChoiceRequired}}
	if err := backends.CompileToolChoice(Constraints{}, &r); err != nil {
		t.Fatal(err)
	}
	g := r.ToolChoice.Grammar
	for _, want := range []string{
		`call-args-0 ::= "{" space "\"input\"" space ":" space "\"" call-input-0 "\"" space "}" space`,
		"call-input-0 ::= call-input-0-r-start\n",
		`call-input-0-t-LF ::= "\\n"`,
		"call-input-1 ::= call-input-1-r-start\n",
	} {
		if !strings.Contains(g, want) {
			t.Fatalf("grammar lacks %q:\n%s", want, g)
		}
	}
	tools[0].Input = &backends.ToolInput{Syntax: "lark", Definition: `start: /a(?=b)/`}
	r = backends.Request{Tools: tools, ToolChoice: backends.ToolChoice{Mode: backends.ToolChoiceFunction, Name: "patch"}}
	err := backends.CompileToolChoice(Constraints{}, &r)
	var se *backends.SchemaError
	if !errors.As(err, &se) || se.Kind != backends.GrammarOfTool || se.Tool != "patch" || !strings.Contains(se.Reason, "lookaround") {
		t.Fatalf("forced call of an untranslatable grammar: %v", err)
	}
	r.ToolChoice = backends.ToolChoice{Mode: backends.ToolChoiceAuto}
	if err := backends.CompileToolChoice(Constraints{}, &r); err != nil {
		t.Fatalf("auto: %v", err)
	}
	// Under auto the untranslatable tool's input is any JSON string, the
	// other keeps its grammar, and the request's tool is left as it was.
	g = r.ToolChoice.Grammar
	if !strings.Contains(g, `"\"input\""`) || strings.Contains(g, "call-input-0") || !strings.Contains(g, "call-input-1 ::= call-input-1-r-start") {
		t.Fatalf("auto grammar:\n%s", g)
	}
	if tools[0].Input.Definition != `start: /a(?=b)/` {
		t.Errorf("relaxing changed the request's tool: %+v", tools[0].Input)
	}
	tools[0].Input = &backends.ToolInput{Syntax: "lark", Definition: `start: (`}
	r = backends.Request{Tools: tools, ToolChoice: backends.ToolChoice{Mode: backends.ToolChoiceAuto}}
	if err := backends.CompileToolChoice(Constraints{}, &r); !errors.As(err, &se) || se.Tool != "patch" {
		t.Fatalf("a grammar that does not parse under auto: %v", err)
	}
}
