package engine

import (
	"slices"
	"testing"
)

// prebuiltFiles is the llama dir of the prebuilt x86-64 libraries.
var prebuiltFiles = []string{
	"libggml-base.so", "libggml-cpu-alderlake.so", "libggml-cpu-haswell.so", "libggml-cpu-sse42.so",
	"libggml-cpu-x64.so", "libggml-cpu-zen4.so", "libggml.so", "libggml.v0.4.0.so", "libllama.so",
	"libllama.v0.4.0.so", "libllama-common.so", "libmtmd.so", ".installed",
}

func TestBackendPlan(t *testing.T) {
	with := func(extra ...string) []string { return append(slices.Clone(prebuiltFiles), extra...) }
	for _, c := range []struct {
		name        string
		files       []string
		variant     string
		backendPath bool
		want        []string // nil: load all
	}{
		{"the variant alone", prebuiltFiles, "zen4", false, []string{"libggml-cpu-zen4.so"}},
		{"GPU backends first, in ggml's order", with("libggml-vulkan.so", "libggml-cuda.so", "libggml-blas.so"), "x64", false,
			[]string{"libggml-blas.so", "libggml-cuda.so", "libggml-vulkan.so", "libggml-cpu-x64.so"}},
		{"no variant named", prebuiltFiles, "", false, nil},
		{"a native build", []string{"libggml-base.so", "libggml-cpu.so", "libggml.so", "libllama.so"}, "native", false, nil},
		{"the variant's library missing", prebuiltFiles, "icelake", false, nil},
		{"a name that is no file name", prebuiltFiles, "../zen4", false, nil},
		{"a backend with variants of its own", with("libggml-cuda-sm89.so"), "zen4", false, nil},
		{"a backend ggml's order lacks", with("libggml-newgpu.so"), "zen4", false, nil},
		{"GGML_BACKEND_PATH set", prebuiltFiles, "zen4", true, nil},
		{"other files of a backend's name are not backends", with("libggml-vulkan.so.1", "libggml-cpu-zen4.so.bak"), "zen4", false,
			[]string{"libggml-cpu-zen4.so"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := backendPlan(c.files, c.variant, c.backendPath)
			if ok != (c.want != nil) || !slices.Equal(got, c.want) {
				t.Errorf("backendPlan(%q) = %q, %v; want %q", c.variant, got, ok, c.want)
			}
		})
	}
}
