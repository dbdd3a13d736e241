package probe

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func platformSources() Sources {
	return Sources{
		CUDA:   readNVML,
		Vulkan: readVulkan,
		Metal:  func() GPUReading { return GPUReading{Unsupported: true} },
	}
}

// readNVML lists CUDA devices through NVML. An absent libnvidia-ml.so.1 means no
// NVIDIA driver: "no CUDA", not an error.
func readNVML() GPUReading {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return GPUReading{LibMissing: "libnvidia-ml.so.1"}
		}
		return GPUReading{Err: fmt.Errorf("nvml init: %s", nvml.ErrorString(ret))}
	}
	defer nvml.Shutdown()
	driver, _ := nvml.SystemGetDriverVersion()
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return GPUReading{Err: fmt.Errorf("nvml device count: %s", nvml.ErrorString(ret))}
	}
	var devs []GPU
	var errs []error
	for i := range n {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			errs = append(errs, fmt.Errorf("device %d: %s", i, nvml.ErrorString(ret)))
			continue
		}
		g := GPU{Driver: driver, Type: "discrete", NativeIndex: i}
		g.Name, _ = d.GetName()
		g.UUID, _ = d.GetUUID()
		if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.TotalBytes, g.FreeBytes = m.Total, m.Free
		}
		if major, minor, ret := d.GetCudaComputeCapability(); ret == nvml.SUCCESS {
			g.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
		}
		devs = append(devs, g)
	}
	if len(devs) == 0 && len(errs) > 0 {
		return GPUReading{Err: errors.Join(errs...)}
	}
	return GPUReading{Devices: devs}
}

// freeVRAM reads how much memory GPU g has free now. CUDA asks NVML (by UUID
// when the probe saw one, else by index); other kinds cannot tell (see FreeVRAM).
func freeVRAM(g GPU) (uint64, bool, error) {
	if g.Kind != CUDA {
		return 0, false, nil
	}
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("nvml init: %s", nvml.ErrorString(ret))
	}
	defer nvml.Shutdown()
	var (
		d   nvml.Device
		ret nvml.Return
	)
	if g.UUID != "" {
		d, ret = nvml.DeviceGetHandleByUUID(g.UUID)
	} else {
		d, ret = nvml.DeviceGetHandleByIndex(g.NativeIndex)
	}
	if ret != nvml.SUCCESS {
		return 0, false, fmt.Errorf("nvml device %s: %s", g.ID(), nvml.ErrorString(ret))
	}
	m, ret := d.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return 0, false, fmt.Errorf("nvml memory of %s: %s", g.ID(), nvml.ErrorString(ret))
	}
	return m.Free, true, nil
}
