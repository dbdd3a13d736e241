package models

import "sync"

// Progress is one event of a pull or import. The same fields go to a terminal
// progress bar and, as NDJSON, to HTTP clients of POST /v1/models/pull.
type Progress struct {
	Status    string `json:"status"`              // what is happening ("pulling onnx/model.onnx", "success")
	Digest    string `json:"digest,omitempty"`    // "sha256:<hex>" of the file being transferred, when known
	File      string `json:"file,omitempty"`      // path inside the model of that file
	Total     int64  `json:"total,omitempty"`     // bytes of that file
	Completed int64  `json:"completed,omitempty"` // bytes of that file already present
}

// Statuses with a fixed meaning. Others are free text.
const (
	StatusResolving = "resolving"        // asking the hub what to fetch
	StatusPulling   = "pulling"          // transferring a file (File, Total, Completed set)
	StatusVerifying = "verifying sha256" // hashing a file before it becomes a blob
	StatusExists    = "already present"  // a file's blob was already in the store
	StatusWriting   = "writing manifest"
	StatusSuccess   = "success"
)

// ProgressFunc receives progress events. The store never calls one
// concurrently with itself for the same operation.
type ProgressFunc func(Progress)

// Emitter serialises and throttles events to one or more subscribers: a
// byte-count event is sent when it advances by at least step bytes, when it
// completes the file, or when the status changes.
type Emitter struct {
	mu   sync.Mutex
	subs map[int]ProgressFunc
	next int
	step int64
	last Progress
}

// NewEmitter returns an Emitter of byte-count events every step bytes
// (default 1 MiB).
func NewEmitter(step int64) *Emitter {
	if step <= 0 {
		step = 1 << 20
	}
	return &Emitter{step: step, subs: make(map[int]ProgressFunc)}
}

// Subscribe adds f (nil is ignored) until the returned function runs.
func (e *Emitter) Subscribe(f ProgressFunc) func() {
	if f == nil {
		return func() {}
	}
	e.mu.Lock()
	id := e.next
	e.next++
	e.subs[id] = f
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		delete(e.subs, id)
		e.mu.Unlock()
	}
}

// Emit sends p to every subscriber unless it is a minor byte-count update.
func (e *Emitter) Emit(p Progress) {
	e.mu.Lock()
	defer e.mu.Unlock()
	minor := p.Status == e.last.Status && p.File == e.last.File && p.Total == e.last.Total &&
		p.Completed != p.Total && p.Completed-e.last.Completed < e.step && p.Completed >= e.last.Completed
	if minor {
		return
	}
	e.last = p
	for _, f := range e.subs {
		f(p)
	}
}
