package onnx

import (
	"testing"

	"github.com/modeld/modeld/probe"
)

// TestCUDADeviceName: a CUDA session reports the name the daemon gave its
// GPU (the probe's index, which can differ from CUDA's own), else CUDA's
// device number, in modeld's vocabulary.
func TestCUDADeviceName(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		want string
	}{{"cuda:0", 1, "cuda:0"}, {"", 2, "cuda:2"}, {"", 0, "cuda:0"}} {
		if got := cudaDevice(tc.name, tc.n); got != tc.want || !probe.ValidDevice(got) {
			t.Errorf("cudaDevice(%q, %d) = %q, want %q", tc.name, tc.n, got, tc.want)
		}
	}
	if !probe.ValidDevice(DeviceCPU) {
		t.Errorf("DeviceCPU %q is not in the vocabulary", DeviceCPU)
	}
}
