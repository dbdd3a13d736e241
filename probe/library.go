package probe

import (
	"fmt"
	"strings"
)

// Library is what llama.cpp itself loaded from the lib dir: the ggml CPU
// variant it chose for this CPU and the devices of every ggml backend. A
// child process reads it (`modeld devices`), so that no GPU driver is opened
// in the daemon's own process.
type Library struct {
	// CPUVariant names the libggml-cpu-<variant> library ggml kept ("zen4",
	// "armv8.2_2", "apple_m1"); "" where the platform cannot tell.
	CPUVariant string          `json:"cpu_variant,omitempty"`
	Devices    []LibraryDevice `json:"devices"`
	Error      string          `json:"error,omitempty"`
}

// LibraryDevice is one ggml backend device, as llama.cpp lists it.
type LibraryDevice struct {
	Name        string `json:"name"` // "CPU", "Vulkan0", "CUDA0", "MTL0"
	Description string `json:"description"`
	Type        string `json:"type"` // CPU, GPU, IGPU, ACCEL
	FreeBytes   uint64 `json:"free_bytes,omitempty"`
	TotalBytes  uint64 `json:"total_bytes,omitempty"`
}

// deviceKind is the backend kind of a ggml device, by its name.
func deviceKind(name string) Kind {
	switch n := strings.ToLower(name); {
	case n == "cpu" || strings.HasPrefix(n, "blas"):
		return CPU
	case strings.HasPrefix(n, "cuda"):
		return CUDA
	case strings.HasPrefix(n, "vulkan"):
		return Vulkan
	case strings.HasPrefix(n, "mtl") || strings.HasPrefix(n, "metal"):
		return Metal
	}
	return ""
}

// Variant is one line naming what was loaded: the CPU variant and the GPU
// backends among the devices ("CPU variant zen4, GPU backends: vulkan").
func (l Library) Variant() string {
	if l.Error != "" {
		return "not read: " + l.Error
	}
	cpu := l.CPUVariant
	if cpu == "" {
		cpu = "(not told on this platform)"
	}
	var gpus []string
	for _, d := range l.Devices {
		if k := deviceKind(d.Name); k != CPU && k != "" && !containsString(gpus, string(k)) {
			gpus = append(gpus, string(k))
		}
	}
	if len(gpus) == 0 {
		return fmt.Sprintf("CPU variant %s, no GPU backend", cpu)
	}
	return fmt.Sprintf("CPU variant %s, GPU backends: %s", cpu, strings.Join(gpus, ", "))
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// metalFromLibrary is the Metal reading of macOS: the Metal devices of
// llama.cpp's own device list. Apple silicon's GPU computes in system
// memory; the size is the working set macOS lets it use.
func metalFromLibrary(lib *Library) GPUReading {
	switch {
	case lib == nil:
		return GPUReading{Err: fmt.Errorf("llama.cpp's device list was not read")}
	case lib.Error != "":
		return GPUReading{Err: fmt.Errorf("llama.cpp's device list: %s", lib.Error)}
	}
	var devs []GPU
	for _, d := range lib.Devices {
		if deviceKind(d.Name) != Metal {
			continue
		}
		devs = append(devs, GPU{
			Name: d.Description, NativeIndex: len(devs), Driver: d.Name,
			TotalBytes: d.TotalBytes, FreeBytes: d.FreeBytes, Type: "integrated", UnifiedMemory: true,
		})
	}
	return GPUReading{Devices: devs}
}
