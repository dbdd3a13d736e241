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
func ToolCall(tools []Tool, opts Options) (string, error) {
	if len(tools) == 0 {
		return "", &InvalidError{Reason: "no tools to call"}
	}
	lim := opts.Limits.withDefaults()
	c := &converter{lim: lim, rules: map[string]string{}}
	c.prim("space")
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
		args, err := c.visit(root, "", 0)
		if err != nil {
			return "", &ToolError{Tool: t.Name, Err: err}
		}
		name, _ := json.Marshal(t.Name)
		body := strings.Join([]string{`"{"`, "space", lit(`"name"`), "space", `":"`, "space",
			lit(string(name)), "space", `","`, "space", lit(`"arguments"`), "space", `":"`, "space",
			args, `"}"`, "space"}, " ")
		r, err := c.rule(fmt.Sprintf("call-%d", i), body)
		if err != nil {
			return "", &ToolError{Tool: t.Name, Err: err}
		}
		alts = append(alts, r)
	}
	if err := c.addRule(RootRule, strings.Join(alts, " | ")); err != nil {
		return "", err
	}
	return c.render()
}
