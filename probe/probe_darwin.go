package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

func platformSources() Sources {
	return Sources{
		CUDA:   func() GPUReading { return GPUReading{Unsupported: true} },
		Vulkan: func() GPUReading { return GPUReading{LibMissing: "libvulkan.1.dylib"} },
		Metal:  readMetal,
	}
}

// readMetal lists the Metal GPUs that system_profiler reports. Apple silicon shares
// system memory with its GPU, so its size is the RAM size.
func readMetal() GPUReading {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "system_profiler", "-json", "SPDisplaysDataType").Output()
	if err != nil {
		return GPUReading{Err: fmt.Errorf("system_profiler: %w", err)}
	}
	return parseSystemProfiler(out, readMemory)
}

func parseSystemProfiler(out []byte, memory func() (MemoryInfo, error)) GPUReading {
	var doc struct {
		Displays []struct {
			Model  string `json:"sppci_model"`
			Cores  string `json:"sppci_cores"`
			VRAM   string `json:"spdisplays_vram"`
			Metal  string `json:"spdisplays_mtlgpufamilysupport"`
			Vendor string `json:"spdisplays_vendor"`
		} `json:"SPDisplaysDataType"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return GPUReading{Err: fmt.Errorf("system_profiler output: %w", err)}
	}
	var devs []GPU
	for _, d := range doc.Displays {
		if d.Metal == "" {
			continue // no Metal support
		}
		g := GPU{Name: d.Model, Driver: d.Metal, Type: "integrated"}
		if d.VRAM != "" {
			g.Type = "discrete"
			g.TotalBytes = parseVRAM(d.VRAM)
		} else if m, err := memory(); err == nil {
			g.TotalBytes, g.FreeBytes, g.UnifiedMemory = m.TotalBytes, m.AvailableBytes, true
		}
		devs = append(devs, g)
	}
	return GPUReading{Devices: devs}
}

// parseVRAM reads sizes such as "8 GB" or "1536 MB".
func parseVRAM(s string) uint64 {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0
	}
	switch strings.ToUpper(f[1]) {
	case "GB":
		return n << 30
	case "MB":
		return n << 20
	}
	return 0
}

// freeVRAM: Metal shares system memory; what is free there is not the GPU's
// to give, so the caller counts against the budget only.
func freeVRAM(GPU) (uint64, bool, error) { return 0, false, nil }
