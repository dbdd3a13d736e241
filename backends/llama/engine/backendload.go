package engine

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ebitengine/purego"
	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// Loading ggml's backends. ggml_backend_load_all_from_path opens every
// libggml-cpu-<variant>.so of the prebuilt libraries (14 on x86-64) to ask
// each for its score on this CPU, and keeps the best; each open maps and
// relocates a 1 MB library: 14-27 ms in all on a 2-CPU machine with the
// libraries in the page cache, 46-66 ms without, against 6-8 and 13-20 ms
// for one (docs/PERFORMANCE.md). Told which variant that is (the daemon's
// probe read it from the libraries its own child process kept), a runner
// opens that one alone.

// ggmlBackendOrder is the order in which ggml_backend_load_all_from_path
// (ggml-backend-reg.cpp of the pinned release) loads its backends, the CPU
// last; loading them one by one in this order gives the devices the same
// indices.
var ggmlBackendOrder = []string{"blas", "zendnn", "cann", "cuda", "hip", "metal", "rpc", "sycl", "vulkan",
	"virtgpu", "opencl", "hexagon", "musa", "openvino", "cpu"}

// ggmlBackendExt is the file extension ggml looks for backends under (".so"
// on every platform but Windows, macOS included).
const ggmlBackendExt = ".so"

// cpuVariantName is what a CPU variant may be called: the part of
// libggml-cpu-<variant>.so that ggml's CMake gives it ("zen4", "armv8.2_2").
var cpuVariantName = regexp.MustCompile(`^[A-Za-z0-9_.]+$`)

// backendPlan is the backend libraries to load one by one, in ggml's order,
// so that the result is what loading all of files (the names in the library
// dir) gives on the CPU whose variant is named: every backend library that
// is not a CPU variant, and of the CPU variants the named one alone. ok is
// false where that cannot be told without ggml's own scoring, and all must
// be loaded: no variant named, a native build's single libggml-cpu.so
// ("native"), the variant's library missing, a backend with variants of its
// own, a name ggml's order does not hold, or GGML_BACKEND_PATH set (it adds
// a library of its own).
func backendPlan(files []string, variant string, backendPath bool) (names []string, ok bool) {
	if variant == "" || variant == "native" || !cpuVariantName.MatchString(variant) || backendPath {
		return nil, false
	}
	cpu := "libggml-cpu-" + variant + ggmlBackendExt
	found := false
	single := map[string]string{} // backend name -> its one library
	for _, f := range files {
		rest, isBackend := strings.CutPrefix(f, "libggml-")
		if !isBackend || filepath.Ext(f) != ggmlBackendExt {
			continue // libggml.so, libllama.so, libggml-base.so.0 ...
		}
		rest = strings.TrimSuffix(rest, ggmlBackendExt)
		name, sub, hasVariants := strings.Cut(rest, "-")
		switch {
		case name == "base":
		case name == "cpu":
			found = found || f == cpu
		case hasVariants && sub != "" || !known(name):
			return nil, false
		default:
			single[name] = f
		}
	}
	if !found {
		return nil, false
	}
	for _, name := range ggmlBackendOrder {
		if f, ok := single[name]; ok {
			names = append(names, f)
		}
	}
	return append(names, cpu), true
}

func known(name string) bool {
	for _, n := range ggmlBackendOrder {
		if n == name && n != "cpu" {
			return true
		}
	}
	return false
}

// loadBackends registers ggml's backends from dir: with cpuVariant, by
// backendPlan, else (or when a library of the plan does not load) all of
// them as ggml_backend_load_all_from_path does. It says which way it went.
func loadBackends(dir, cpuVariant string) (chosen bool) {
	// A native build's one libggml-cpu.so leaves ggml nothing to choose.
	if cpuVariant != "" && cpuVariant != "native" {
		err := loadPlanned(dir, cpuVariant)
		if err == nil {
			return true
		}
		slog.Warn("llama: loading every ggml CPU variant instead of the one named", "variant", cpuVariant, "err", err)
	}
	_ = yz.GGMLBackendLoadAllFromPath(dir) // its only error is an empty path
	return false
}

// loadPlanned loads the libraries backendPlan names. A backend library
// that does not open is skipped, as ggml skips it; the CPU variant must
// load. Libraries it loaded stay registered on an error: loading all after
// it registers each of them once (ggml keeps one registration per backend).
func loadPlanned(dir, cpuVariant string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	files := make([]string, 0, len(entries))
	for _, e := range entries {
		files = append(files, e.Name())
	}
	_, backendPath := os.LookupEnv("GGML_BACKEND_PATH")
	plan, ok := backendPlan(files, cpuVariant, backendPath)
	if !ok {
		return fmt.Errorf("the libraries in %s need ggml's own choice", dir)
	}
	load, err := ggmlBackendLoad(dir)
	if err != nil {
		return err
	}
	for i, name := range plan {
		path := filepath.Join(dir, name)
		cpu := i == len(plan)-1
		if !cpu && !opens(path) {
			slog.Debug("llama: backend library does not load; skipped", "path", path)
			continue
		}
		if load(path) == 0 && cpu {
			return fmt.Errorf("%s did not load", name)
		}
	}
	if yz.GGMLBackendDeviceByType(yz.GGMLBackendDeviceTypeCPU) == 0 {
		return fmt.Errorf("no CPU device after loading %s", plan[len(plan)-1])
	}
	return nil
}

// opens reports whether the library at path opens the way ggml opens it
// (ggml_backend_load would log an error where ggml's own scan is silent).
func opens(path string) bool {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return false
	}
	_ = purego.Dlclose(h) // ggml holds its own reference once it loaded it
	return true
}

// ggmlBackendLoad is ggml_backend_load of the libggml in dir, which yzma
// does not bind: it loads one backend library and registers it, returning
// its registration (0: it did not load, or refuses this machine).
func ggmlBackendLoad(dir string) (func(path string) uintptr, error) {
	path := filepath.Join(dir, requiredLibs[1])
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	var load func(path string) uintptr
	sym, err := purego.Dlsym(h, "ggml_backend_load")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	purego.RegisterFunc(&load, sym)
	return load, nil
}
