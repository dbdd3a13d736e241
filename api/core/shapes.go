package core

import (
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/modeld/modeld/api/accesslog"
)

// pathShape is a dialect's error shape on the paths match accepts.
type pathShape struct {
	match func(path string) bool
	shape func(*Error) any
}

// ErrorShapeOn gives refusals on the paths match accepts the dialect's
// error shape; a dialect calls it as it registers its routes (Anthropic's
// on /v1/messages and below it, Ollama's below /api/).
func (s *Core) ErrorShapeOn(match func(path string) bool, shape func(*Error) any) {
	s.shapes = append(s.shapes, pathShape{match, shape})
}

// ErrorShape is the error body of the dialect that owns path: the first
// that ErrorShapeOn registered for it, OpenAI's everywhere else (Responses
// included). The status is the same in every shape.
func (s *Core) ErrorShape(p string) func(*Error) any {
	for _, ps := range s.shapes {
		if ps.match(p) {
			return ps.shape
		}
	}
	return openAIShape
}

// errorShapeKey is where ShapeErrors keeps a request's error shape for
// WriteError.
const errorShapeKey = "modeld.errorShape"

// ShapeErrors is the first middleware: it notes the error shape of the
// request's path for WriteError.
func (s *Core) ShapeErrors(c *gin.Context) {
	if shape := s.ErrorShape(c.Request.URL.Path); shape != nil {
		c.Set(errorShapeKey, shape)
	}
	c.Next()
}

// openAIShape is {"error": {"message", "type", "param", "code"}}.
func openAIShape(e *Error) any { return map[string]*Error{"error": e} }

// WriteErrorTo writes e in shape on a plain ResponseWriter.
func WriteErrorTo(w http.ResponseWriter, e *Error, shape func(*Error) any) {
	b, err := json.Marshal(shape(e))
	if err != nil { // the shapes hold strings and numbers only
		b = []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
}

// NoteTokens tells the request's access line its token counts (for the
// routes that do not stream a generation's events through the core).
func NoteTokens(c *gin.Context, prompt, completion int) { accesslog.NoteTokens(c, prompt, completion) }
