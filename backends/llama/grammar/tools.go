package grammar

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Tool is a function a model may call: its name and the JSON Schema of its
// arguments (empty: any JSON object).
type Tool struct {
	Name       string
	Parameters json.RawMessage
	// Input, when set, makes the arguments {"input": TEXT}, TEXT a JSON
	// string whose body the rules Input returns accept: GBNF rules, one a
	// line, the first named root, every other name beginning with prefix.
	Input func(root, prefix string) (string, error)
}

// ToolError is the error of ToolCall for one tool's parameters schema: Err
// (an *UnsupportedError, *InvalidError or *LimitError) says what, Tool
// which. It matches ErrSchema.
type ToolError struct {
	Tool string
	Err  error
}

func (e *ToolError) Error() string { return fmt.Sprintf("tool %q: %v", e.Tool, e.Err) }
func (e *ToolError) Unwrap() error { return e.Err }

// ToolCall returns a GBNF grammar, rooted at RootRule, whose sentences are
// one call object {"name": N, "arguments": A} of the tools: N the JSON
// string of a tool's name and A a JSON text that tool's parameters schema
// accepts, both keys in that order, bounded whitespace between tokens and
// after the object (as FromSchema). Each tool's rules are its own ($ref
// resolves inside its parameters schema); the limits bound the whole
// grammar. It needs at least one tool; a schema it cannot enforce is a
// *ToolError naming the tool.
//
// So that a backend can write another call syntax around the same
// arguments, the grammar names its parts, for tool i (0, 1, ... in the
// order given):
//
//	call-<i>       the call object
//	call-name-<i>  the tool's name as a JSON string
//	call-fname-<i> the tool's name as it is (no quotes)
//	call-args-<i>  its arguments (bounded whitespace after, as every value)
//
// and call-name-key and call-args-key, the object's two keys ("name" and
// "arguments", quoted), which a backend may define again (a family that
// writes "parameters") by replacing their lines.
func ToolCall(tools []Tool, opts Options) (string, error) {
	if len(tools) == 0 {
		return "", &InvalidError{Reason: "no tools to call"}
	}
	lim := opts.Limits.withDefaults()
	c := &converter{lim: lim, rules: map[string]string{}}
	c.prim("space")
	if err := c.addRule("call-name-key", lit(`"name"`)); err != nil {
		return "", err
	}
	if err := c.addRule("call-args-key", lit(`"arguments"`)); err != nil {
		return "", err
	}
	alts := make([]string, 0, len(tools))
	for i, t := range tools {
		params := t.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object"}`)
		}
		root, err := parseJSON(params, lim.MaxDepth*4)
		if err != nil {
			return "", &ToolError{Tool: t.Name, Err: err}
		}
		c.root, c.refs, c.left = root, map[string]string{}, map[string]bool{}
		var args string
		if t.Input != nil {
			args, err = c.inputArgs(t, i)
		} else {
			args, err = c.visit(root, "", 0)
		}
		if err != nil {
			return "", &ToolError{Tool: t.Name, Err: err}
		}
		name, _ := json.Marshal(t.Name)
		parts := []struct{ rule, body string }{
			{fmt.Sprintf("call-name-%d", i), lit(string(name))},
			{fmt.Sprintf("call-fname-%d", i), Literal(t.Name)},
			{fmt.Sprintf("call-args-%d", i), args},
			{fmt.Sprintf("call-%d", i), strings.Join([]string{`"{"`, "space", "call-name-key", "space", `":"`, "space",
				fmt.Sprintf("call-name-%d", i), "space", `","`, "space", "call-args-key", "space", `":"`, "space",
				fmt.Sprintf("call-args-%d", i), `"}"`, "space"}, " ")},
		}
		for _, p := range parts {
			if err := c.addRule(p.rule, p.body); err != nil {
				return "", &ToolError{Tool: t.Name, Err: err}
			}
		}
		alts = append(alts, fmt.Sprintf("call-%d", i))
	}
	if err := c.addRule(RootRule, strings.Join(alts, " | ")); err != nil {
		return "", err
	}
	return c.render()
}

// inputArgs adds the rules of tool i's freeform input and returns its
// arguments object {"input": "..."}.
func (c *converter) inputArgs(t Tool, i int) (string, error) {
	root := fmt.Sprintf("call-input-%d", i)
	rules, err := t.Input(root, root+"-")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(strings.TrimRight(rules, "\n"), "\n") {
		name, body, ok := strings.Cut(line, " ::= ")
		if !ok || !strings.HasPrefix(name, root) {
			return "", &InvalidError{Reason: fmt.Sprintf("freeform input rule %q is not named under %s", name, root)}
		}
		if err := c.addRule(name, body); err != nil {
			return "", err
		}
	}
	return `"{" space "\"input\"" space ":" space "\"" ` + root + ` "\"" space "}" space`, nil
}

// Literal is s as a GBNF string literal ("" for the empty string).
func Literal(s string) string { return lit(s) }
