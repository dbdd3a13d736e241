package probe

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func baseReadings() Readings {
	return Readings{
		GOOS: "linux", GOARCH: "amd64",
		CPU:    CPUInfo{Model: "Test CPU", Cores: 2, Threads: 2, Features: []string{"avx2"}},
		Memory: MemoryInfo{TotalBytes: 24 << 30, AvailableBytes: 20 << 30},
		GPU: map[Kind]GPUReading{
			CUDA:   {LibMissing: "libnvidia-ml.so.1"},
			Vulkan: {LibMissing: "libvulkan.so.1"},
			Metal:  {Unsupported: true},
		},
		GGML: map[Kind]bool{},
	}
}

func TestDecideNoGPU(t *testing.T) {
	in := Decide(baseReadings())
	if len(in.GPUs) != 0 {
		t.Fatalf("GPUs = %v, want none", in.GPUs)
	}
	if b := in.Backend(CPU); !b.Usable {
		t.Fatalf("cpu not usable: %+v", b)
	}
	want := map[Kind]string{
		CUDA:   "cuda: libnvidia-ml.so.1 not found",
		Vulkan: "vulkan: libvulkan.so.1 not found",
		Metal:  "metal: not available on linux",
	}
	for k, reason := range want {
		b := in.Backend(k)
		if b.Usable || b.Reason != reason {
			t.Errorf("%s = %+v, want unusable with reason %q", k, b, reason)
		}
	}
}

func TestDecideCUDATwoDevices(t *testing.T) {
	r := baseReadings()
	r.GPU[CUDA] = GPUReading{Devices: []GPU{
		{Name: "H200", TotalBytes: 141 << 30, FreeBytes: 140 << 30, ComputeCapability: "9.0", Driver: "580.1"},
		{Name: "H200", TotalBytes: 141 << 30, FreeBytes: 100 << 30, ComputeCapability: "9.0", Driver: "580.1"},
	}}
	r.GGML[CUDA] = true
	in := Decide(r)
	devs := in.Devices(CUDA)
	if len(devs) != 2 {
		t.Fatalf("cuda devices = %d, want 2", len(devs))
	}
	if devs[1].ID() != "cuda:1" || devs[1].FreeBytes != 100<<30 || devs[0].ComputeCapability != "9.0" {
		t.Fatalf("devices = %+v", devs)
	}
	if b := in.Backend(CUDA); !b.Usable || b.Devices != 2 || b.Reason != "" {
		t.Fatalf("cuda = %+v, want usable with 2 devices", b)
	}

	// The same hardware without the ggml CUDA library is present but not usable.
	r.GGML[CUDA] = false
	b := Decide(r).Backend(CUDA)
	if b.Usable || b.Devices != 2 || !strings.Contains(b.Reason, "ggml cuda backend not installed") ||
		!strings.Contains(b.Reason, "scripts/bootstrap --gpu cuda") {
		t.Fatalf("cuda without ggml lib = %+v", b)
	}
}

func TestDecideNVMLInitError(t *testing.T) {
	r := baseReadings()
	r.GPU[CUDA] = GPUReading{Err: errors.New("nvml init: Driver/library version mismatch")}
	r.GGML[CUDA] = true
	in := Decide(r)
	b := in.Backend(CUDA)
	if b.Usable || b.Reason != "cuda: nvml init: Driver/library version mismatch" {
		t.Fatalf("cuda = %+v", b)
	}
	if len(in.GPUs) != 0 {
		t.Fatalf("GPUs = %v, want none after an init error", in.GPUs)
	}
}

func TestDecideVulkanWithoutGGMLLib(t *testing.T) {
	r := baseReadings()
	r.GPU[Vulkan] = GPUReading{Devices: []GPU{{Name: "AMD Radeon", Type: "discrete", TotalBytes: 8 << 30}}}
	in := Decide(r)
	b := in.Backend(Vulkan)
	if b.Usable || b.Devices != 1 || b.Reason != "vulkan: ggml vulkan backend not installed (run scripts/bootstrap --gpu vulkan)" {
		t.Fatalf("vulkan = %+v", b)
	}
	if got := in.Devices(Vulkan); len(got) != 1 || got[0].ID() != "vulkan:0" {
		t.Fatalf("vulkan devices = %+v", got)
	}

	r.GGMLMissing = true
	if b := Decide(r).Backend(Vulkan); b.Usable || !strings.Contains(b.Reason, "llama.cpp libraries not installed") {
		t.Fatalf("vulkan without any llama libs = %+v", b)
	}
}

func TestDecideMetalOnDarwin(t *testing.T) {
	r := baseReadings()
	r.GOOS = "darwin"
	r.GPU[CUDA] = GPUReading{Unsupported: true}
	r.GPU[Metal] = GPUReading{Devices: []GPU{{Name: "Apple M3", TotalBytes: 16 << 30, UnifiedMemory: true}}}
	in := Decide(r)
	if b := in.Backend(Metal); !b.Usable || b.Devices != 1 {
		t.Fatalf("metal = %+v", b)
	}
	if b := in.Backend(CUDA); b.Reason != "cuda: not available on darwin" {
		t.Fatalf("cuda = %+v", b)
	}
}

func fakeSources() Sources {
	return Sources{
		CPU:    func() CPUInfo { return CPUInfo{Model: "Fake", Cores: 1, Threads: 2} },
		Memory: func() (MemoryInfo, error) { return MemoryInfo{TotalBytes: 1 << 30}, nil },
		CUDA:   func() GPUReading { return GPUReading{LibMissing: "libnvidia-ml.so.1"} },
		Vulkan: func() GPUReading { return GPUReading{LibMissing: "libvulkan.so.1"} },
		Metal:  func() GPUReading { return GPUReading{Unsupported: true} },
		GGML:   func() map[Kind]bool { return map[Kind]bool{} },
	}
}

func TestRunHangingSourceTimesOut(t *testing.T) {
	src := fakeSources()
	release := make(chan struct{})
	defer close(release)
	src.CUDA = func() GPUReading { <-release; return GPUReading{} }
	in := Run(context.Background(), src, 50*time.Millisecond)
	b := in.Backend(CUDA)
	if b.Usable || !strings.Contains(b.Reason, "probe timed out after 50ms") {
		t.Fatalf("cuda = %+v, want a timeout reason", b)
	}
	// The other sources still answered.
	if in.CPU.Model != "Fake" || in.Memory.TotalBytes != 1<<30 {
		t.Fatalf("cpu/memory lost after a timeout: %+v %+v", in.CPU, in.Memory)
	}
	if b := in.Backend(Vulkan); b.Reason != "vulkan: libvulkan.so.1 not found" {
		t.Fatalf("vulkan = %+v", b)
	}
}

func TestOnceRunsOnceUnderConcurrency(t *testing.T) {
	var calls atomic.Int32
	src := fakeSources()
	src.CPU = func() CPUInfo { calls.Add(1); return CPUInfo{Model: "Fake"} }
	get := Once(src, time.Second)
	var wg sync.WaitGroup
	results := make([]Info, 64)
	for i := range results {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = get() }()
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("probe ran %d times, want 1", n)
	}
	for _, r := range results {
		if !r.ProbedAt.Equal(results[0].ProbedAt) {
			t.Fatal("callers saw different probe results")
		}
	}
}

func TestInfoJSON(t *testing.T) {
	in := Run(context.Background(), fakeSources(), time.Second)
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"cpu", "memory", "gpus", "backends", "took"} {
		if _, ok := back[key]; !ok {
			t.Errorf("JSON lacks %q: %s", key, b)
		}
	}
	if n := len(back["backends"].([]any)); n != 4 {
		t.Errorf("backends = %d, want 4 (cpu, cuda, metal, vulkan)", n)
	}
}

// A software Vulkan device (llvmpipe) is named and not used unless software
// GPUs are allowed; allowed, it is a usable GPU that keeps its driver index.
func TestDecideSoftwareVulkan(t *testing.T) {
	llvmpipe := GPU{Name: "llvmpipe (LLVM 15.0.6, 256 bits)", Type: "cpu", TotalBytes: 2 << 30, NativeIndex: 0, Driver: "vulkan 1.3.230"}
	r := baseReadings()
	r.GPU[Vulkan] = GPUReading{Devices: []GPU{llvmpipe}}
	r.GGML[Vulkan] = true

	off := Decide(r)
	if b := off.Backend(Vulkan); b.Usable || b.Devices != 0 ||
		b.Reason != "vulkan: only software devices (llvmpipe (LLVM 15.0.6, 256 bits)), which --allow-software-gpu makes usable for tests and demos" {
		t.Errorf("software device, not allowed: %+v", b)
	}
	if len(off.GPUs) != 0 {
		t.Errorf("GPUs = %+v, want none", off.GPUs)
	}

	r.AllowSoftware = true
	on := Decide(r)
	if b := on.Backend(Vulkan); !b.Usable || b.Devices != 1 || b.Reason != "" {
		t.Errorf("software device, allowed: %+v", b)
	}
	if devs := on.Devices(Vulkan); len(devs) != 1 || devs[0].ID() != "vulkan:0" || devs[0].NativeIndex != 0 || devs[0].TotalBytes != 2<<30 {
		t.Errorf("devices = %+v", devs)
	}

	// Allowed, but the ggml Vulkan library is missing: present, not usable.
	r.GGML[Vulkan] = false
	if b := Decide(r).Backend(Vulkan); b.Usable || b.Devices != 1 || !strings.Contains(b.Reason, "scripts/bootstrap --gpu vulkan") {
		t.Errorf("allowed without libggml-vulkan: %+v", b)
	}
}

// Next to a real GPU a software device is dropped, and the real one keeps
// its index in the driver's enumeration (what GGML_VK_VISIBLE_DEVICES names).
func TestDecideSoftwareBesideHardware(t *testing.T) {
	r := baseReadings()
	r.GPU[Vulkan] = GPUReading{Devices: []GPU{
		{Name: "llvmpipe", Type: "cpu", TotalBytes: 2 << 30, NativeIndex: 0},
		{Name: "Radeon", Type: "discrete", TotalBytes: 16 << 30, NativeIndex: 1},
	}}
	r.GGML[Vulkan] = true
	in := Decide(r)
	devs := in.Devices(Vulkan)
	if len(devs) != 1 || devs[0].Name != "Radeon" || devs[0].ID() != "vulkan:0" || devs[0].NativeIndex != 1 {
		t.Fatalf("devices = %+v, want the Radeon alone, native index 1", devs)
	}
	if b := in.Backend(Vulkan); !b.Usable || b.Devices != 1 {
		t.Errorf("vulkan = %+v", b)
	}
	r.AllowSoftware = true
	if devs := Decide(r).Devices(Vulkan); len(devs) != 2 || devs[0].NativeIndex != 0 || devs[1].NativeIndex != 1 {
		t.Errorf("allowed: devices = %+v, want both", devs)
	}
}

// Run passes Sources.AllowSoftware on to Decide.
func TestRunAllowSoftware(t *testing.T) {
	src := Sources{Vulkan: func() GPUReading {
		return GPUReading{Devices: []GPU{{Name: "llvmpipe", Type: "cpu", TotalBytes: 2 << 30}}}
	}, GGML: func() map[Kind]bool { return map[Kind]bool{Vulkan: true} }}
	if b := Run(context.Background(), src, time.Minute).Backend(Vulkan); b.Usable {
		t.Errorf("not allowed: %+v", b)
	}
	src.AllowSoftware = true
	if b := Run(context.Background(), src, time.Minute).Backend(Vulkan); !b.Usable {
		t.Errorf("allowed: %+v", b)
	}
}
