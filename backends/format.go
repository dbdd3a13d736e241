package backends

import (
	"fmt"
	"net/http"
	"sync"
)

// SchemaKind says what a SchemaError's schema constrains.
type SchemaKind int

const (
	SchemaOfFormat SchemaKind = iota // the response format's JSON schema
	SchemaOfTool                     // a tool's parameters schema
	GrammarOfTool                    // a custom tool's grammar (Lark, regex)
)

// SchemaError is a schema or grammar of a request that a backend cannot
// enforce. It speaks of the schema only (Reason names the keyword or the
// bound and the path inside the schema), never of a dialect's field: the
// dialect that refuses it names its own field (response_format, format,
// output_config.format, text.format; tools and the tool's schema).
type SchemaError struct {
	Kind   SchemaKind
	Tool   string // the tool's name, for SchemaOfTool and GrammarOfTool
	Reason string
	Err    error
}

func (e *SchemaError) Error() string {
	if e.Kind == SchemaOfFormat {
		return e.Reason
	}
	return fmt.Sprintf("tool %s: %s", QuoteInput(e.Tool), e.Reason)
}

func (e *SchemaError) Unwrap() error     { return e.Err }
func (e *SchemaError) HTTPStatus() int   { return http.StatusBadRequest }
func (e *SchemaError) ErrorCode() string { return "" }

// FormatCompiler turns a json_object or json_schema ResponseFormat into the
// constraint a backend samples under, written to f.Grammar. A schema it
// cannot enforce is a *SchemaError naming the keyword and where.
type FormatCompiler func(f *ResponseFormat) error

var (
	formatMu       sync.RWMutex
	formatCompiler FormatCompiler
)

// RegisterFormatCompiler makes c the compiler of structured response
// formats, from the initialisation of the backend that samples under them.
// It panics when c is nil or a compiler is already registered.
func RegisterFormatCompiler(c FormatCompiler) {
	formatMu.Lock()
	defer formatMu.Unlock()
	if c == nil {
		panic("backends: RegisterFormatCompiler needs a compiler")
	}
	if formatCompiler != nil {
		panic("backends: RegisterFormatCompiler called twice")
	}
	formatCompiler = c
}

// CompileResponseFormat fills f.Grammar for a json_object or json_schema
// format, with the registered compiler. A dialect calls it while checking
// a request, before any model is acquired, so that a schema that cannot be
// enforced is refused without loading anything. Free text needs nothing;
// without a registered compiler a structured format is a *BadRequestError.
func CompileResponseFormat(f *ResponseFormat) error {
	if f.IsText() {
		f.Grammar = ""
		return nil
	}
	formatMu.RLock()
	c := formatCompiler
	formatMu.RUnlock()
	if c == nil {
		return &SchemaError{Reason: fmt.Sprintf("the format %s is not supported: no backend constrains its output", f.Type)}
	}
	return c(f)
}

// ToolCompiler fills r.ToolChoice.Grammar from r.Tools and r.ToolChoice.
// A parameters schema it cannot enforce under required or a named
// function is a *SchemaError naming the tool and the keyword;
// under auto it leaves the grammar empty (calls unconstrained) instead.
type ToolCompiler func(r *Request) error

var toolCompiler ToolCompiler

// RegisterToolCompiler makes c the compiler of tool-call grammars, from the
// initialisation of the backend that samples under them. It panics when c
// is nil or a compiler is already registered.
func RegisterToolCompiler(c ToolCompiler) {
	formatMu.Lock()
	defer formatMu.Unlock()
	if c == nil {
		panic("backends: RegisterToolCompiler needs a compiler")
	}
	if toolCompiler != nil {
		panic("backends: RegisterToolCompiler called twice")
	}
	toolCompiler = c
}

// CompileToolChoice fills r.ToolChoice.Grammar with the registered
// compiler, before any model is acquired (as CompileResponseFormat). No
// tools, tool choice none, or no registered compiler: no grammar.
func CompileToolChoice(r *Request) error {
	r.ToolChoice.Grammar = ""
	if len(r.Tools) == 0 || r.ToolChoice.Mode == ToolChoiceNone {
		return nil
	}
	formatMu.RLock()
	c := toolCompiler
	formatMu.RUnlock()
	if c == nil {
		return nil
	}
	return c(r)
}
