package responses

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// The Responses API's tools, as the chat core's functions. Function tools
// are functions; a namespace group's functions are functions named
// NAMESPACE__NAME (the flat name agents use where a namespace cannot
// travel), and their calls go back as function_call items with name and
// namespace apart; a custom tool is a freeform function whose one argument
// is its input text, under its grammar, and its call goes back as a
// custom_tool_call; tool_search with execution "client" is a function
// named tool_search whose call goes back as a tool_search_call. Hosted
// tools, which run on OpenAI's platform (web_search, file_search,
// code_interpreter, ...), and tool types modeld does not know are dropped
// and logged; a tool_choice that names one is a 400.

// responseTool is a tool of the Responses API.
type responseTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
	// Format is a custom tool's input format.
	Format *customFormat `json:"format,omitempty"`
	// Tools are a namespace's functions and custom tools.
	Tools []responseTool `json:"tools,omitempty"`
	// Execution is tool_search's: "client" or "server".
	Execution string `json:"execution,omitempty"`
}

type customFormat struct {
	Type       string `json:"type"`
	Syntax     string `json:"syntax"`
	Definition string `json:"definition"`
}

// respToolKind is what a model-facing function stands for.
type respToolKind int

const (
	kindFunction   respToolKind = iota
	kindCustom                  // a custom (freeform) tool: a custom_tool_call
	kindToolSearch              // client tool search: a tool_search_call
)

// toolOrigin is the client's tool behind a model-facing function.
type toolOrigin struct {
	kind      respToolKind
	name      string // the client's name
	namespace string
}

// responseTools are a request's tools as the core's functions, with what
// each stands for.
type responseTools struct {
	tools   []backends.Tool
	origin  map[string]toolOrigin // by model-facing name
	dropped []string              // the types dropped, each once
}

// namespacedName is the model-facing name of a namespace's tool: the two
// joined by "__", stray underscores at the seam trimmed.
func namespacedName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return strings.TrimRight(namespace, "_") + "__" + strings.TrimLeft(name, "_")
}

// hostedTools are OpenAI's platform tools: they run on its servers, so
// modeld cannot run them and drops them.
var hostedTools = map[string]bool{
	"web_search": true, "web_search_preview": true, "web_search_preview_2025_03_11": true, "web_search_2025_08_26": true,
	"file_search": true, "code_interpreter": true, "image_generation": true, "computer_use_preview": true,
	"computer": true, "computer_use": true, "mcp": true, "local_shell": true, "shell": true, "apply_patch": true,
}

// add reads one tool (at param) into ts.
func (ts *responseTools) add(t responseTool, namespace, param string) error {
	switch t.Type {
	case "function":
		if t.Name == "" {
			return core.BadRequest(param+".name", "%s must be {type: \"function\", name, description, parameters}: name is missing", param)
		}
		return ts.put(backends.Tool{Name: namespacedName(namespace, t.Name), Description: t.Description, Parameters: t.Parameters,
			Strict: t.Strict == nil || *t.Strict}, toolOrigin{kindFunction, t.Name, namespace}, param)
	case "custom":
		if t.Name == "" {
			return core.BadRequest(param+".name", "%s must be {type: \"custom\", name, description, format}: name is missing", param)
		}
		in, desc, err := customInput(t, param)
		if err != nil {
			return err
		}
		return ts.put(backends.Tool{Name: namespacedName(namespace, t.Name), Description: desc, Parameters: freeformSchema(in),
			Strict: true, Input: in}, toolOrigin{kindCustom, t.Name, namespace}, param)
	case "namespace":
		if namespace != "" {
			return core.BadRequest(param+".type", "%s is a namespace inside a namespace", param)
		}
		if t.Name == "" {
			return core.BadRequest(param+".name", "%s is a namespace without a name", param)
		}
		for j, sub := range t.Tools {
			if sub.Type != "function" && sub.Type != "custom" {
				ts.drop(sub.Type)
				continue
			}
			if err := ts.add(sub, t.Name, fmt.Sprintf("%s.tools[%d]", param, j)); err != nil {
				return err
			}
		}
		return nil
	case "tool_search":
		if t.Execution != "client" {
			ts.drop("tool_search (server execution)")
			return nil
		}
		params := t.Parameters
		if !core.Given(params) {
			params = json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)
		}
		return ts.put(backends.Tool{Name: "tool_search", Description: t.Description, Parameters: params},
			toolOrigin{kind: kindToolSearch, name: "tool_search"}, param)
	case "":
		return core.BadRequest(param+".type", "%s has no type", param)
	}
	ts.drop(t.Type)
	return nil
}

func (ts *responseTools) put(t backends.Tool, o toolOrigin, param string) error {
	defined := func(name string) bool { _, dup := ts.origin[name]; return dup }
	d := core.ToolPaths{At: param, Schema: "parameters", NameRule: "must make a function name of 1 to 64 letters, digits, _ or - (namespaced: namespace__name)"}
	if errs := core.CheckToolDef(t, defined, d); len(errs) > 0 {
		return errs[0] // one problem per tool, the first
	}
	ts.origin[t.Name] = o
	ts.tools = append(ts.tools, t)
	return nil
}

func (ts *responseTools) drop(typ string) {
	for _, d := range ts.dropped {
		if d == typ {
			return
		}
	}
	ts.dropped = append(ts.dropped, typ)
}

// customInput is a custom tool's input grammar and the description the
// model reads.
func customInput(t responseTool, param string) (*backends.ToolInput, string, error) {
	f := t.Format
	if f == nil || f.Type == "" || f.Type == "text" {
		return &backends.ToolInput{}, t.Description, nil
	}
	if f.Type != "grammar" {
		return nil, "", core.BadRequest(param+".format.type", "%s.format.type %s is not text or grammar", param, core.Quote(f.Type))
	}
	switch f.Syntax {
	case "lark", "regex":
	default:
		return nil, "", core.BadRequest(param+".format.syntax", "%s.format.syntax %s is not lark or regex", param, core.Quote(f.Syntax))
	}
	if f.Definition == "" {
		return nil, "", core.BadRequest(param+".format.definition", "%s.format.definition is empty", param)
	}
	desc := t.Description
	if desc != "" {
		desc += "\n\n"
	}
	desc += "Call it with the text as input; the text follows this " + f.Syntax + " grammar:\n" + f.Definition
	return &backends.ToolInput{Syntax: f.Syntax, Definition: f.Definition}, desc, nil
}

func freeformSchema(*backends.ToolInput) json.RawMessage { return backends.FreeformParameters }

// readTools reads a tools array (at param) into ts.
func (ts *responseTools) readTools(raw json.RawMessage, param string) error {
	var tools []responseTool
	if err := json.Unmarshal(raw, &tools); err != nil {
		return core.BadRequest(param, "%s must be an array of tools ({type: \"function\", name, description, parameters}, custom, namespace, ...)", param)
	}
	if len(tools) > core.MaxTools {
		return core.TooMany(param, len(tools), core.MaxTools, "tools")
	}
	var errs []error
	for i, t := range tools {
		if err := ts.add(t, "", fmt.Sprintf("%s[%d]", param, i)); err != nil {
			errs = append(errs, err)
		}
	}
	return core.JoinBadRequests(errs)
}

// loaded adds the tools a tool_search_output item loaded, unless the
// request defines them already.
func (ts *responseTools) loaded(raw json.RawMessage, param string) error {
	var tools []responseTool
	if err := json.Unmarshal(raw, &tools); err != nil {
		return core.BadRequest(param, "%s must be an array of tools", param)
	}
	for i, t := range tools {
		sub := &responseTools{origin: map[string]toolOrigin{}}
		if err := sub.add(t, "", fmt.Sprintf("%s[%d]", param, i)); err != nil {
			return err
		}
		for _, bt := range sub.tools {
			if _, have := ts.origin[bt.Name]; !have {
				ts.origin[bt.Name] = sub.origin[bt.Name]
				ts.tools = append(ts.tools, bt)
			}
		}
	}
	return nil
}

// toolChoice reads tool_choice into gen.ToolChoice (and narrows ts for
// allowed_tools).
func (ts *responseTools) toolChoice(raw json.RawMessage, gen *backends.Request) error {
	choice, typ, err := core.ParseToolChoice(raw, toolChoiceWire)
	if err != nil {
		return err
	}
	if typ == "" { // a mode
		gen.ToolChoice.Mode = choice.Mode
		return nil
	}
	var named struct {
		Type      string         `json:"type"`
		Name      string         `json:"name"`
		Namespace string         `json:"namespace"`
		Mode      string         `json:"mode"`
		Tools     []responseTool `json:"tools"`
	}
	_ = json.Unmarshal(raw, &named) // ParseToolChoice has read it as an object
	switch named.Type {
	case "function", "custom":
		name := namespacedName(named.Namespace, named.Name)
		o, ok := ts.origin[name]
		if !ok && named.Namespace == "" {
			name, o, ok = ts.byClientName(named.Name)
		}
		want := kindFunction
		if named.Type == "custom" {
			want = kindCustom
		}
		if !ok || o.kind != want {
			return core.BadRequest("tool_choice.name", "tool_choice names the %s tool %s, which is not among the tools", named.Type, core.Quote(named.Name))
		}
		gen.ToolChoice = backends.ToolChoice{Mode: backends.ToolChoiceFunction, Name: name}
		return nil
	case "tool_search":
		if _, ok := ts.origin["tool_search"]; !ok {
			return core.BadRequest("tool_choice", "tool_choice names tool_search, which is not among the tools (as a client-executed tool)")
		}
		gen.ToolChoice = backends.ToolChoice{Mode: backends.ToolChoiceFunction, Name: "tool_search"}
		return nil
	case "allowed_tools":
		keep := map[string]bool{}
		for _, t := range named.Tools {
			name, _, ok := ts.byClientName(t.Name)
			if t.Type == "tool_search" {
				name, ok = "tool_search", true
			}
			if !ok {
				return core.BadRequest("tool_choice.tools", "tool_choice allows %s, which is not among the tools", core.Quote(t.Name))
			}
			keep[name] = true
		}
		var tools []backends.Tool
		for _, t := range ts.tools {
			if keep[t.Name] {
				tools = append(tools, t)
			}
		}
		ts.tools = tools
		switch named.Mode {
		case "", "auto":
			gen.ToolChoice.Mode = backends.ToolChoiceAuto
		case "required":
			gen.ToolChoice.Mode = backends.ToolChoiceRequired
		default:
			return core.BadRequest("tool_choice.mode", "tool_choice.mode %s is not auto or required", core.Quote(named.Mode))
		}
		return nil
	}
	return core.BadRequest("tool_choice", "tool_choice names a tool of type %s, which modeld does not run (%s)", core.Quote(named.Type), builtinToolsHint)
}

// byClientName finds a tool by the client's name (its own, or namespaced).
func (ts *responseTools) byClientName(name string) (string, toolOrigin, bool) {
	if o, ok := ts.origin[name]; ok {
		return name, o, true
	}
	var found []string
	for n, o := range ts.origin {
		if o.name == name {
			found = append(found, n)
		}
	}
	if len(found) != 1 {
		return "", toolOrigin{}, false
	}
	sort.Strings(found)
	return found[0], ts.origin[found[0]], true
}

// toolChoiceWire is the Responses tool_choice: "auto", "none", "required",
// {"type": "function"|"custom", "name": ...}, and the types this dialect
// reads itself (tool_search, allowed_tools, and the hosted tools it
// refuses with a hint).
var toolChoiceWire = core.ToolChoiceWire{
	Field:   "tool_choice",
	Strings: map[string]backends.ToolChoiceMode{"auto": backends.ToolChoiceAuto, "none": backends.ToolChoiceNone, "required": backends.ToolChoiceRequired},
	Named:   []string{"function", "custom"}, NamePath: "name",
	Extra: []string{"tool_search", "allowed_tools", "*"},
}
