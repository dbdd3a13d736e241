package probe

import (
	"regexp"
	"strconv"
)

// Device names. Every device modeld shows, accounts or reports (the probe's
// GPU list, placement, the cache's budgets, ps, /v1/system, the backends'
// Info and a response's X-Modeld-Device) is named in one vocabulary: "cpu",
// "cuda:N", "vulkan:N" or "metal:0", N being the probe's index of the GPU
// among those of its kind (GPU.Index, not the driver's NativeIndex).
// ggml's Metal backend runs on the system's default device only, so there
// is one Metal device, metal:0.

// DeviceCPU is the CPU's device name.
const DeviceCPU = string(CPU)

// devicePattern is the whole vocabulary.
var devicePattern = regexp.MustCompile(`^(cpu|cuda:\d+|vulkan:\d+|metal:0)$`)

// DevicePattern is the vocabulary as a regular expression, for tests and
// documentation.
func DevicePattern() string { return devicePattern.String() }

// ValidDevice reports whether name is in the vocabulary.
func ValidDevice(name string) bool { return devicePattern.MatchString(name) }

// DeviceName is the name of the GPU of kind k at the probe's index i
// (DeviceCPU for k CPU).
func DeviceName(k Kind, i int) string {
	if k == CPU {
		return DeviceCPU
	}
	return string(k) + ":" + strconv.Itoa(i)
}
