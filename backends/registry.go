package backends

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
)

// LoadSpec is what a backend needs to load one model. The daemon fills it
// from its configuration and the placement it chose; a backend reads the
// fields that concern it and ignores the rest.
type LoadSpec struct {
	ID   string // the model's canonical id, for logs and errors
	Path string // the model file (GGUF) or directory (ONNX)
	Task string // what the model serves, in the store's task names
	// LibRoot holds the native runtime libraries (see Libs).
	LibRoot string

	ContextSize int // the context per sequence; 0 chooses
	ContextCap  int // the bound on a chosen context; 0: DefaultContextCap
	Slots       int // requests run at once; 0 chooses
	Threads     int
	// BatchThreads is the threads for prompt processing (0: Threads).
	BatchThreads int
	// QueueLimit bounds the requests waiting for a slot (0: no bound).
	QueueLimit int

	// UseGPU loads onto GPU (its native index) with GPULayers layers
	// offloaded (-1: all); Env is the environment that shows a runner
	// process that GPU and no other. Device is that GPU's name in modeld's
	// output (probe.DeviceName: "cuda:0", "vulkan:1", "metal:0"), which
	// Info.Device reports while the model runs there.
	UseGPU    bool
	GPU       int
	Device    string
	GPULayers int
	Env       []string

	Logger *slog.Logger
	// Options carries backend-specific settings (a backend documents the
	// type it accepts; any other is an error).
	Options any
}

// Factory loads a model. It returns a *BadRequestError, ErrInvalidModel or
// another error of this package when the model cannot be loaded; ctx bounds
// the load.
type Factory func(ctx context.Context, spec LoadSpec) (Model, error)

// The registry of backends by name. It is written by Register at program
// initialisation and read afterwards.
var (
	registryMu sync.RWMutex
	registry   = map[string]Factory{}
)

// Register makes a backend available under name. It panics when name is
// empty, factory is nil or name is already registered: each backend is
// registered once, from its package's or the program's initialisation.
func Register(name string, factory Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if name == "" || factory == nil {
		panic("backends: Register needs a name and a factory")
	}
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("backends: Register called twice for backend %q", name))
	}
	registry[name] = factory
}

// Lookup returns the factory registered under name.
func Lookup(name string) (Factory, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	f, ok := registry[name]
	return f, ok
}

// Load loads a model with the backend registered under name; an unknown
// name is an error that lists the known ones.
func Load(ctx context.Context, name string, spec LoadSpec) (Model, error) {
	f, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("backends: no backend %q is registered (registered: %v)", name, Names())
	}
	return f(ctx, spec)
}

// Names lists the registered backends, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
