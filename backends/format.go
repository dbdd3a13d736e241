package backends

import (
	"fmt"
	"net/http"
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

// Constrainer is a backend's ability to sample under a grammar: it
// compiles a request's response format and tool choice into the grammars
// its sampler enforces. A model that constrains its output implements it;
// the daemon also hands its chat backend's Constrainer to the dialects, so
// that a schema it cannot enforce is refused before any model is loaded.
// It is a value passed where it is needed, never a process-wide setting.
//
// CompileResponseFormat writes to f.Grammar the constraint of a
// json_object or json_schema format (free text needs none); a schema it
// cannot enforce is a *SchemaError naming the keyword and where.
// CompileToolChoice writes r.ToolChoice.Grammar from r.Tools and
// r.ToolChoice; a parameters schema it cannot enforce under required or a
// named function is a *SchemaError naming the tool and the keyword; under
// auto it leaves that tool unconstrained instead.
type Constrainer interface {
	CompileResponseFormat(f *ResponseFormat) error
	CompileToolChoice(r *Request) error
}

// CompileResponseFormat fills f.Grammar with c, the backend's compiler. A
// dialect calls it while checking a request, before any model is
// acquired. Free text needs nothing; with no compiler (c nil) a structured
// format is a *SchemaError.
func CompileResponseFormat(c Constrainer, f *ResponseFormat) error {
	if f.IsText() {
		f.Grammar = ""
		return nil
	}
	if c == nil {
		return &SchemaError{Reason: fmt.Sprintf("the format %s is not supported: no backend constrains its output", f.Type)}
	}
	return c.CompileResponseFormat(f)
}

// CompileToolChoice fills r.ToolChoice.Grammar with c, before any model is
// acquired (as CompileResponseFormat). No tools, tool choice none, or no
// compiler: no grammar.
func CompileToolChoice(c Constrainer, r *Request) error {
	r.ToolChoice.Grammar = ""
	if len(r.Tools) == 0 || r.ToolChoice.Mode == ToolChoiceNone || c == nil {
		return nil
	}
	return c.CompileToolChoice(r)
}
