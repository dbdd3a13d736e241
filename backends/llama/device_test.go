package llama

import (
	"context"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/probe"
)

// TestContractDevice: the contract names the device a model runs on in
// modeld's vocabulary — the GPU the placement named when layers were
// offloaded, the CPU when none were or the load fell back — never a
// generic "gpu".
func TestContractDevice(t *testing.T) {
	for _, tc := range []struct {
		info Info
		gpu  string
		want string
	}{
		{Info{GPULayers: -1}, "vulkan:0", "vulkan:0"},
		{Info{GPULayers: 12}, "cuda:1", "cuda:1"},
		{Info{GPULayers: -1}, "metal:0", "metal:0"},
		{Info{GPULayers: -1, GPUFallback: "no GPU backend device is loaded"}, "cuda:0", "cpu"},
		{Info{GPULayers: 0}, "vulkan:0", "cpu"},
		{Info{GPULayers: 0}, "", "cpu"},
	} {
		got := contract(tc.info, tc.gpu).Device
		if got != tc.want || !probe.ValidDevice(got) {
			t.Errorf("contract(%+v, %q).Device = %q, want %q", tc.info, tc.gpu, got, tc.want)
		}
	}
}

// TestGPULoadNamesItsDevice: a GPU load whose spec does not name its
// device in the vocabulary is refused before any runner starts.
func TestGPULoadNamesItsDevice(t *testing.T) {
	for _, dev := range []string{"", "gpu", "cpu", "cuda", "metal:1", "Vulkan0"} {
		_, err := load(context.Background(), backends.LoadSpec{ID: "m", Path: "/nonexistent.gguf", UseGPU: true, GPULayers: -1, Device: dev,
			Options: LoadOptions{Command: []string{"/bin/false"}}})
		if err == nil || !strings.Contains(err.Error(), "names its device") {
			t.Errorf("device %q: %v, want the load refused for its device name", dev, err)
		}
	}
}
