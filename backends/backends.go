// Package backends owns the contract between modeld and the runtimes it runs
// models on, and the runtimes themselves below it: llama.cpp (backends/llama,
// GGUF chat models, hosted in runner child processes) and ONNX Runtime
// (backends/onnx, under the task pipelines).
//
// The root package holds the contract: Model (Info, Close), the optional
// capabilities found by type assertion (Generator, Tokenizer, and the task
// capabilities Embedder, Classifier, ZeroShotClassifier, Reranker and
// Summarizer with their options, results, bounds and task names), the registry
// of backends by name (Register, Lookup, Load), the internal request and
// event model every dialect translates to (Request, Message, Tool, Event,
// Usage), and the typed errors of every backend (ContextOverflowError,
// BusyError, BadRequestError, RunnerDiedError and the sentinels), which say
// their own HTTP meaning through StatusError. It also knows where the runtime
// libraries are installed, whether they are complete, and how far a build of
// llama.cpp for this CPU that scripts/bootstrap runs has got. It loads no native
// code, and knows nothing of HTTP wire types, the model store or the cache.
package backends

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Libs is the layout of the runtime-library root that scripts/bootstrap fills.
type Libs struct {
	Root string // holds llama/ and onnxruntime/
	// GOOS names the platform whose file names the libraries have
	// (runtime.GOOS when empty): .so on Linux, .dylib on macOS.
	GOOS string
}

// LibNames are the files one platform's runtime libraries are loaded by.
type LibNames struct {
	Llama []string // in llama/: what yzma loads
	CPU   string   // glob in llama/ of the ggml CPU backends (one is needed)
	ONNX  string   // in onnxruntime/
	// Multimodal is llama.cpp's multimodal library in llama/ (images in
	// chat), which only scripts/bootstrap --with-mtmd installs.
	Multimodal string
}

// PlatformLibNames returns the library names of platform goos, as
// scripts/bootstrap installs them.
func PlatformLibNames(goos string) LibNames {
	if goos == "darwin" {
		return LibNames{
			Llama: []string{"libllama.dylib", "libggml.dylib", "libggml-base.dylib"},
			CPU:   "libggml-cpu*.so", ONNX: "libonnxruntime.1.dylib", Multimodal: "libmtmd.dylib",
		}
	}
	return LibNames{
		Llama: []string{"libllama.so", "libggml.so", "libggml-base.so"},
		CPU:   "libggml-cpu*.so", ONNX: "libonnxruntime.so.1", Multimodal: "libmtmd.so",
	}
}

// HasMultimodal reports whether llama.cpp's multimodal library is in the
// llama dir: whether a GGUF chat model with a projector reads images.
func (l Libs) HasMultimodal() bool {
	_, err := os.Stat(filepath.Join(l.LlamaDir(), l.names().Multimodal))
	return err == nil
}

func (l Libs) names() LibNames {
	if l.GOOS == "" {
		return PlatformLibNames(runtime.GOOS)
	}
	return PlatformLibNames(l.GOOS)
}

// LlamaDir is the directory holding libllama.so and the ggml backends.
func (l Libs) LlamaDir() string { return filepath.Join(l.Root, "llama") }

// ONNXRuntimePath is the path of the ONNX Runtime shared library.
func (l Libs) ONNXRuntimePath() string {
	return filepath.Join(l.Root, "onnxruntime", l.names().ONNX)
}

// LibStatus says whether one runtime library set is installed.
type LibStatus struct {
	Name      string   `json:"name"`
	Dir       string   `json:"dir"`
	Installed bool     `json:"installed"`
	Version   string   `json:"version,omitempty"` // what scripts/bootstrap recorded
	Missing   []string `json:"missing,omitempty"`
	GPU       []string `json:"gpu_backends,omitempty"`
	// Multimodal says that llama.cpp's multimodal library is installed
	// (llama.cpp only): chat models with a projector read images.
	Multimodal bool `json:"multimodal,omitempty"`
	// NativeBuild is a build of llama.cpp for this CPU under way or left
	// unfinished (llama.cpp only); the libraries above are still the ones
	// a model loads until it is installed.
	NativeBuild *NativeBuild `json:"native_build,omitempty"`
	Fix         string       `json:"fix,omitempty"`
}

// Error describes a missing library set in one line, with the command that installs it.
func (s LibStatus) Error() string {
	return fmt.Sprintf("%s runtime libraries missing in %s (%s): run %s",
		s.Name, s.Dir, strings.Join(s.Missing, ", "), s.Fix)
}

// Check inspects both library sets without loading them.
func (l Libs) Check() []LibStatus {
	return []LibStatus{l.checkLlama(), l.checkONNX()}
}

func (l Libs) checkLlama() LibStatus {
	dir := l.LlamaDir()
	s := LibStatus{Name: "llama.cpp", Dir: dir}
	names := l.names()
	for _, f := range names.Llama {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			s.Missing = append(s.Missing, f)
		}
	}
	// libggml-cpu-<variant>.so in the prebuilt libraries, libggml-cpu.so in
	// a native build (scripts/bootstrap --native).
	if cpus, _ := filepath.Glob(filepath.Join(dir, names.CPU)); len(cpus) == 0 {
		s.Missing = append(s.Missing, names.CPU)
	}
	for _, g := range []string{"cuda", "vulkan", "metal"} {
		if _, err := os.Stat(filepath.Join(dir, "libggml-"+g+".so")); err == nil {
			s.GPU = append(s.GPU, g)
		}
	}
	s.Multimodal = l.HasMultimodal()
	s.NativeBuild = l.NativeBuild()
	return l.finish(s, dir)
}

func (l Libs) checkONNX() LibStatus {
	dir := filepath.Dir(l.ONNXRuntimePath())
	s := LibStatus{Name: "onnxruntime", Dir: dir}
	if _, err := os.Stat(l.ONNXRuntimePath()); err != nil {
		s.Missing = append(s.Missing, filepath.Base(l.ONNXRuntimePath()))
	}
	return l.finish(s, dir)
}

func (l Libs) finish(s LibStatus, dir string) LibStatus {
	s.Installed = len(s.Missing) == 0
	if b, err := os.ReadFile(filepath.Join(dir, ".installed")); err == nil {
		s.Version = strings.TrimSpace(string(b))
	}
	if !s.Installed {
		s.Fix = "scripts/bootstrap"
		if l.Root != "" {
			s.Fix = "scripts/bootstrap --lib-dir " + l.Root
		}
	}
	return s
}
