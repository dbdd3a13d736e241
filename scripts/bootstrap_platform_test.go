package scripts_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The ONNX Runtime package holds every platform's library; each platform must
// take its own.
var ortAllPkg = fakePkg{"onnxruntime-node@1.30.0", map[string]string{
	"package/bin/napi-v6/linux/x64/libonnxruntime.so.1":         "ort linux/amd64",
	"package/bin/napi-v6/linux/arm64/libonnxruntime.so.1":       "ort linux/arm64",
	"package/bin/napi-v6/darwin/arm64/libonnxruntime.1.dylib":   "ort darwin/arm64",
	"package/bin/napi-v6/darwin/arm64/onnxruntime_binding.node": "binding",
}}

var (
	llamaArm64Pkg = fakePkg{"@node-llama-cpp/linux-arm64@3.21.1", map[string]string{
		"package/bins/linux-arm64/libllama.v0.4.0.so":       "llama arm64",
		"package/bins/linux-arm64/libggml.v0.4.0.so":        "ggml arm64",
		"package/bins/linux-arm64/libggml-base.so":          "base arm64",
		"package/bins/linux-arm64/libggml-cpu-armv8.0_1.so": "cpu armv8.0",
		"package/bins/linux-arm64/libggml-cpu-armv9.2_2.so": "cpu armv9.2",
		"package/bins/linux-arm64/llama-addon.node":         "not a lib",
	}}
	llamaMetalPkg = fakePkg{"@node-llama-cpp/mac-arm64-metal@3.21.1", map[string]string{
		"package/bins/mac-arm64-metal/libllama.metal.v0.4.0.dylib": "llama metal",
		"package/bins/mac-arm64-metal/libggml.metal.v0.4.0.dylib":  "ggml metal",
		"package/bins/mac-arm64-metal/libggml-base.dylib":          "base metal",
		"package/bins/mac-arm64-metal/libggml-metal.so":            "metal backend",
		"package/bins/mac-arm64-metal/libggml-cpu-apple_m1.so":     "cpu m1",
		"package/bins/mac-arm64-metal/llama-addon.node":            "not a lib",
	}}
)

// TestBootstrapPlatforms: --platform (the GOOS/GOARCH a machine would have)
// picks the platform's llama.cpp package, its library names and its ONNX
// Runtime library, and installs no Debian package for a platform that is not
// this machine's.
func TestBootstrapPlatforms(t *testing.T) {
	for _, tc := range []struct {
		platform string
		pkg      fakePkg
		links    map[string]string // name the daemon loads -> file
		files    map[string]string // file -> content
		ort      string
	}{
		{"linux/arm64", llamaArm64Pkg,
			map[string]string{"libllama.so": "libllama.v0.4.0.so", "libggml.so": "libggml.v0.4.0.so"},
			map[string]string{"libggml-base.so": "base arm64", "libggml-cpu-armv8.0_1.so": "cpu armv8.0", "libggml-cpu-armv9.2_2.so": "cpu armv9.2"},
			"libonnxruntime.so.1"},
		{"darwin/arm64", llamaMetalPkg,
			map[string]string{"libllama.dylib": "libllama.metal.v0.4.0.dylib", "libggml.dylib": "libggml.metal.v0.4.0.dylib"},
			map[string]string{"libggml-base.dylib": "base metal", "libggml-metal.so": "metal backend", "libggml-cpu-apple_m1.so": "cpu m1"},
			"libonnxruntime.1.dylib"},
	} {
		t.Run(tc.platform, func(t *testing.T) {
			e := newEnv(t, []fakePkg{llamaPkg, tc.pkg, ortAllPkg}, "")
			out, err := e.run(nil, "--platform", tc.platform)
			if err != nil {
				t.Fatalf("bootstrap --platform %s: %v\n%s", tc.platform, err, out)
			}
			if !strings.Contains(out, "done ("+tc.platform+")") {
				t.Errorf("output does not name the platform:\n%s", out)
			}
			if strings.Contains(out, "installing Debian packages") {
				t.Errorf("installed the host's Debian packages for %s:\n%s", tc.platform, out)
			}
			llama := filepath.Join(e.libDir, "llama")
			for link, target := range tc.links {
				if got, err := os.Readlink(filepath.Join(llama, link)); err != nil || got != target {
					t.Errorf("%s -> %q (%v), want %s", link, got, err, target)
				}
			}
			for f, want := range tc.files {
				if b, err := os.ReadFile(filepath.Join(llama, f)); err != nil || string(b) != want {
					t.Errorf("%s = %q (%v), want %q", f, b, err, want)
				}
			}
			if _, err := os.Stat(filepath.Join(llama, "llama-addon.node")); err == nil {
				t.Error("non-library file extracted")
			}
			ort := filepath.Join(e.libDir, "onnxruntime")
			if b, err := os.ReadFile(filepath.Join(ort, tc.ort)); err != nil || string(b) != "ort "+tc.platform {
				t.Errorf("%s = %q (%v), want the %s library", tc.ort, b, err, tc.platform)
			}
			if entries, _ := os.ReadDir(ort); len(entries) != 2 { // the library and .installed
				t.Errorf("onnxruntime/ holds %d entries, want one library and its stamp", len(entries))
			}
			if p := e.packed(); len(p) != 2 || p[0] != tc.pkg.spec {
				t.Errorf("packed %v, want %s and the ONNX Runtime package", p, tc.pkg.spec)
			}

			// Another platform into the same dir replaces both library sets.
			out, err = e.run(nil, "--platform", "linux/amd64")
			if err != nil {
				t.Fatalf("back to linux/amd64: %v\n%s", err, out)
			}
			if strings.Contains(out, "nothing to do") {
				t.Fatalf("kept the %s libraries for linux/amd64:\n%s", tc.platform, out)
			}
			if b, _ := os.ReadFile(filepath.Join(ort, "libonnxruntime.so.1")); string(b) != "ort linux/amd64" {
				t.Errorf("onnxruntime after linux/amd64 = %q", b)
			}
		})
	}
}

func TestBootstrapPlatformRefusals(t *testing.T) {
	e := newEnv(t, []fakePkg{llamaPkg, llamaArm64Pkg, llamaMetalPkg, ortAllPkg}, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--platform", "windows/amd64"}, "no prebuilt libraries for windows/amd64"},
		{[]string{"--platform", "darwin/arm64", "--gpu", "cuda"}, "Metal is built into its libraries"},
		{[]string{"--platform", "linux/arm64", "--gpu", "vulkan"}, "no prebuilt vulkan backend for linux/arm64"},
		{[]string{"--platform", "darwin/arm64", "--native"}, "--native builds for this Linux machine only"},
		{[]string{"--platform"}, "--platform needs a value"},
	} {
		out, err := e.run(nil, tc.args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v: err = %v, want %q in:\n%s", tc.args, err, tc.want, out)
		}
	}
	if p := e.packed(); len(p) != 0 {
		t.Errorf("a refused run fetched %v", p)
	}
}
