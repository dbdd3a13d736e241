package llama

import (
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/wire"
)

// The engine's settings and descriptions as the runner protocol carries
// them.
type (
	Options = wire.Options
	Info    = wire.Info
	Stats   = wire.Stats
)

// Defaults of Options.
const (
	DefaultSlots      = wire.DefaultSlots
	DefaultLookup     = wire.DefaultLookup
	DefaultContextCap = wire.DefaultContextCap
	DefaultBatchSize  = wire.DefaultBatchSize
)

// The request model and the errors of package backends, by the engine's
// names.
type (
	Message      = backends.Message
	Tool         = backends.Tool
	Request      = backends.Request
	Event        = backends.Event
	Usage        = backends.Usage
	FinishReason = backends.FinishReason
)

// Finish reasons.
const (
	FinishStop      = backends.FinishStop
	FinishLength    = backends.FinishLength
	FinishCancelled = backends.FinishCancelled
	FinishError     = backends.FinishError
)

// Errors a Runner's calls return (errors.Is works across the socket).
var (
	ErrClosed         = backends.ErrClosed
	ErrBusy           = backends.ErrBusy
	ErrInvalidRequest = backends.ErrInvalidRequest
	ErrInvalidModel   = backends.ErrInvalidModel
	ErrNoChatTemplate = backends.ErrNoChatTemplate
	ErrTemplate       = backends.ErrTemplate
	ErrDecode         = wire.ErrDecode
	ErrNotInitialized = wire.ErrNotInitialized
)
