package pipelines

import "github.com/modeld/modeld/backends"

// Errors callers map to responses, backends' own: ErrInvalidInput is the
// caller's fault (bad request); ErrWrongModel means the model folder does not
// hold a model for the task asked (bad request naming the model); anything
// else is a server-side failure (a corrupt file, a runtime error). Each says
// its HTTP meaning through backends.StatusError.
var (
	ErrInvalidInput = backends.ErrInvalidRequest
	ErrWrongModel   = backends.ErrWrongModel
)
