package probe

import (
	"strings"
	"testing"
)

// FreeVRAM re-reads a CUDA device through NVML: by UUID, and by index when
// the probe saw none. Without NVML it says it cannot tell, with no error;
// Vulkan devices never can (see FreeVRAM).
func TestFreeVRAM(t *testing.T) {
	if free, ok, err := FreeVRAM(GPU{Kind: Vulkan, TotalBytes: 8 << 30}); ok || err != nil || free != 0 {
		t.Fatalf("vulkan: %d %v %v, want no reading and no error", free, ok, err)
	}
	rd := readNVML()
	if rd.LibMissing != "" {
		free, ok, err := FreeVRAM(GPU{Kind: CUDA, UUID: "GPU-00000000-0000-0000-0000-000000000000"})
		if ok || err != nil || free != 0 {
			t.Fatalf("without NVML: %d %v %v, want no reading and no error", free, ok, err)
		}
		return
	}
	if rd.Err != nil || len(rd.Devices) == 0 {
		t.Fatalf("NVML present but unreadable: %+v", rd)
	}
	for i, g := range rd.Devices {
		g.Kind = CUDA
		if !strings.HasPrefix(g.UUID, "GPU-") || g.NativeIndex != i {
			t.Fatalf("device %d: UUID %q, native index %d", i, g.UUID, g.NativeIndex)
		}
		byIndex := g
		byIndex.UUID = ""
		for _, d := range []GPU{g, byIndex} {
			free, ok, err := FreeVRAM(d)
			if !ok || err != nil || free == 0 || free > g.TotalBytes {
				t.Fatalf("device %d (uuid %q): free %d of %d, %v %v", i, d.UUID, free, g.TotalBytes, ok, err)
			}
		}
	}
	if _, ok, err := FreeVRAM(GPU{Kind: CUDA, UUID: "GPU-not-a-device"}); ok || err == nil {
		t.Fatalf("unknown UUID: ok %v err %v, want an error", ok, err)
	}
}
