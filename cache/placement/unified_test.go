package placement

import (
	"context"
	"testing"

	"github.com/modeld/modeld/probe"
)

// mac is a fake Apple silicon machine: 64 GiB of RAM, and llama.cpp's Metal
// device with the working set macOS allows it.
func mac(working uint64) probe.Info {
	return probe.Decide(probe.Readings{
		GOOS: "darwin", GOARCH: "arm64", Memory: probe.MemoryInfo{TotalBytes: 64 << 30},
		GPU: map[probe.Kind]probe.GPUReading{
			probe.Metal:  {Devices: []probe.GPU{{Name: "Apple M3 Max", TotalBytes: working, Type: "integrated"}}},
			probe.CUDA:   {Unsupported: true},
			probe.Vulkan: {LibMissing: "libvulkan.1.dylib"},
		},
		GGML: map[probe.Kind]bool{},
	})
}

func TestUnifiedMemoryByPlatform(t *testing.T) {
	metal := probe.GPU{Kind: probe.Metal}
	for _, tc := range []struct {
		goos string
		g    probe.GPU
		want bool
	}{
		{"darwin", metal, true},
		{"linux", metal, false}, // no such device; nothing to share
		{"darwin", probe.GPU{Kind: probe.Vulkan}, false},
		{"linux", probe.GPU{Kind: probe.Vulkan, UnifiedMemory: true}, true},
		{"linux", probe.GPU{Kind: probe.CUDA}, false},
	} {
		if got := UnifiedMemory(tc.goos, tc.g); got != tc.want {
			t.Errorf("UnifiedMemory(%s, %+v) = %v, want %v", tc.goos, tc.g, got, tc.want)
		}
	}
}

// On unified memory the GPU's budget is no larger than the RAM budget they
// share; a discrete GPU of the same size gets its own share.
func TestBudgetsUnifiedShareRAM(t *testing.T) {
	info := mac(60 << 30)
	if !info.Backend(probe.Metal).Usable {
		t.Fatalf("metal not usable: %+v", info.Backend(probe.Metal))
	}
	ram, vram := Budgets(info, 0, 0)
	if want := share(64<<30, RAMShare); ram != want {
		t.Fatalf("ram budget %d, want %d", ram, want)
	}
	if vram["metal:0"] != ram {
		t.Fatalf("metal budget %d, want the shared RAM budget %d (its own share would be %d)", vram["metal:0"], ram, share(60<<30, VRAMShare))
	}
	// A smaller working set stays the limit.
	if _, vram := Budgets(mac(32<<30), 0, 0); vram["metal:0"] != share(32<<30, VRAMShare) {
		t.Fatalf("metal budget %d with a 32 GiB working set", vram["metal:0"])
	}
	// A discrete GPU of the same size is budgeted on its own.
	_, vram = Budgets(machine(cuda(0, 60<<30)), 0, 0)
	if vram["cuda:0"] != share(60<<30, VRAMShare) {
		t.Fatalf("cuda budget %d", vram["cuda:0"])
	}
}

// A model on Metal holds all its bytes in RAM: the plan's RAM counts the
// GPU part too, so the cache's RAM budget sees what the CPU lost. On a
// discrete GPU the plan's RAM is the host part only.
func TestPlaceUnifiedCountsGPUInRAM(t *testing.T) {
	m := testModel(t, 4)
	f := &fakeGPUs{}
	info := mac(48 << 30)
	_, budgets := Budgets(info, 0, 0)
	plan, err := f.planner(info, budgets).Place(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Device != "metal:0" || plan.VRAM == 0 {
		t.Fatalf("plan = %s with %d VRAM (%s), want metal:0", plan.Device, plan.VRAM, plan.Reason)
	}
	if plan.RAM != plan.Estimate.RAM.Total()+plan.VRAM {
		t.Fatalf("unified plan RAM %d, want host %d + GPU %d", plan.RAM, plan.Estimate.RAM.Total(), plan.VRAM)
	}

	cinfo := machine(cuda(0, 48<<30))
	_, cb := Budgets(cinfo, 0, 0)
	cplan, err := f.planner(cinfo, cb).Place(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if cplan.Device != "cuda:0" || cplan.RAM != cplan.Estimate.RAM.Total() {
		t.Fatalf("discrete plan %s RAM %d, want the host part %d", cplan.Device, cplan.RAM, cplan.Estimate.RAM.Total())
	}
}

// share is the budget Budgets gives a share of n bytes.
func share(n uint64, f float64) int64 { return int64(float64(n) * f) }
