package pipelines

import "errors"

// Errors callers map to responses: ErrInvalidInput is the caller's fault (bad
// request); ErrWrongModel means the model folder does not hold a model for the
// task asked (bad request naming the model); anything else is a server-side
// failure (a corrupt file, a runtime error).
var (
	ErrInvalidInput = errors.New("invalid input")
	ErrWrongModel   = errors.New("model does not fit the task")
)
