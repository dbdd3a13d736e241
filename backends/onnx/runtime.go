// Package onnx runs ONNX models through ONNX Runtime (github.com/yalue/onnxruntime_go,
// cgo). It owns the process's one ORT environment (Init), sessions created from model
// files with their input/output names and shapes read from the model, the choice of
// execution provider (CUDA when asked and loadable, else CPU with the reason kept),
// and the copy of tensors between Go and ORT. It knows nothing about tokenizers or
// tasks: the pipelines package builds tensors and reads results.
package onnx

import (
	"errors"
	"fmt"
	"os"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// ErrLibraryMissing is returned by Init when the ONNX Runtime shared library is not
// at the given path.
var ErrLibraryMissing = errors.New("ONNX Runtime library missing")

// Runtime is the process's ONNX Runtime environment. There is one per process; Init
// returns the same value to every caller.
type Runtime struct {
	libPath string
	version string
}

// process mirrors ONNX Runtime's own process-global environment (the library keeps
// one OrtEnv per process); it is the only package-level state and is guarded.
var process struct {
	mu sync.Mutex
	rt *Runtime
}

// Init loads the ONNX Runtime library at libPath (…/libonnxruntime.so.1) and creates
// the environment with fatal-only logging, so that a CUDA provider that cannot load
// reports through errors, not through stderr. Calling Init again with the same path
// returns the same Runtime; a different path is an error. A failed Init can be
// retried.
func Init(libPath string) (*Runtime, error) {
	process.mu.Lock()
	defer process.mu.Unlock()
	if process.rt != nil {
		if process.rt.libPath != libPath {
			return nil, fmt.Errorf("onnx: runtime already initialized from %s, cannot switch to %s", process.rt.libPath, libPath)
		}
		return process.rt, nil
	}
	if libPath == "" {
		return nil, fmt.Errorf("onnx: no ONNX Runtime library path given: %w (install it with scripts/bootstrap)", ErrLibraryMissing)
	}
	if _, err := os.Stat(libPath); err != nil {
		return nil, fmt.Errorf("onnx: %w: %s not found (install it with scripts/bootstrap): %w", ErrLibraryMissing, libPath, err)
	}
	ort.SetSharedLibraryPath(libPath)
	if err := ort.InitializeEnvironment(ort.WithLogLevelFatal()); err != nil {
		return nil, fmt.Errorf("onnx: load %s: %w", libPath, err)
	}
	process.rt = &Runtime{libPath: libPath, version: ort.GetVersion()}
	return process.rt, nil
}

// Version is the loaded ONNX Runtime version, e.g. "1.30.0".
func (r *Runtime) Version() string { return r.version }

// LibraryPath is the shared library Init loaded.
func (r *Runtime) LibraryPath() string { return r.libPath }
