package probe

import "testing"

// appleLibrary is llama.cpp's device list on an Apple silicon Mac.
var appleLibrary = &Library{CPUVariant: "apple_m2_m3", Devices: []LibraryDevice{
	{Name: "MTL0", Description: "Apple M3", Type: "GPU", FreeBytes: 11 << 30, TotalBytes: 12 << 30},
	{Name: "BLAS", Description: "Accelerate", Type: "ACCEL"},
	{Name: "CPU", Description: "Apple M3", Type: "CPU", TotalBytes: 16 << 30},
}}

// On macOS the Metal GPUs are the Metal devices llama.cpp lists, named
// metal:0, on unified memory.
func TestDecideMetalFromLibraryDevices(t *testing.T) {
	in := Decide(Readings{
		GOOS: "darwin", GOARCH: "arm64", Memory: MemoryInfo{TotalBytes: 16 << 30},
		GPU:     map[Kind]GPUReading{CUDA: {Unsupported: true}, Vulkan: {LibMissing: "libvulkan.1.dylib"}},
		GGML:    map[Kind]bool{Metal: true},
		Library: appleLibrary,
	})
	gpus := in.Devices(Metal)
	if len(gpus) != 1 {
		t.Fatalf("metal GPUs = %+v", in.GPUs)
	}
	g := gpus[0]
	if g.ID() != "metal:0" || g.Name != "Apple M3" || g.TotalBytes != 12<<30 || g.FreeBytes != 11<<30 || !g.UnifiedMemory {
		t.Fatalf("metal GPU = %+v (id %s)", g, g.ID())
	}
	if b := in.Backend(Metal); !b.Usable || b.Devices != 1 {
		t.Fatalf("metal backend = %+v", b)
	}
	if len(in.GPUs) != 1 {
		t.Fatalf("the CPU or BLAS device became a GPU: %+v", in.GPUs)
	}
	if in.Library == nil || in.Library.Variant() != "CPU variant apple_m2_m3, GPU backends: metal" {
		t.Fatalf("library = %+v", in.Library)
	}
}

// Without the device list, or with a failed one, macOS reports why Metal is
// not usable; Linux never takes Metal from it.
func TestDecideMetalWithoutLibrary(t *testing.T) {
	for _, tc := range []struct {
		lib  *Library
		want string
	}{
		{nil, "metal: llama.cpp's device list was not read"},
		{&Library{Error: "libllama.dylib missing"}, "metal: llama.cpp's device list: libllama.dylib missing"},
		{&Library{Devices: []LibraryDevice{{Name: "CPU", Type: "CPU"}}}, "metal: no devices"},
	} {
		in := Decide(Readings{GOOS: "darwin", Library: tc.lib})
		if b := in.Backend(Metal); b.Usable || b.Reason != tc.want {
			t.Errorf("library %+v: metal = %+v, want reason %q", tc.lib, b, tc.want)
		}
	}
	in := Decide(Readings{GOOS: "linux", GPU: map[Kind]GPUReading{Metal: {Unsupported: true}}, Library: appleLibrary})
	if len(in.Devices(Metal)) != 0 || in.Backend(Metal).Usable {
		t.Fatalf("linux took Metal from a device list: %+v", in.Backend(Metal))
	}
}

func TestLibraryVariant(t *testing.T) {
	for _, tc := range []struct {
		lib  Library
		want string
	}{
		{Library{CPUVariant: "zen4", Devices: []LibraryDevice{{Name: "CPU"}, {Name: "Vulkan0"}, {Name: "Vulkan1"}}}, "CPU variant zen4, GPU backends: vulkan"},
		{Library{CPUVariant: "armv8.2_2", Devices: []LibraryDevice{{Name: "CPU"}}}, "CPU variant armv8.2_2, no GPU backend"},
		{Library{Devices: []LibraryDevice{{Name: "CPU"}, {Name: "CUDA0"}}}, "CPU variant (not told on this platform), GPU backends: cuda"},
		{Library{Error: "exit status 1"}, "not read: exit status 1"},
	} {
		if got := tc.lib.Variant(); got != tc.want {
			t.Errorf("Variant(%+v) = %q, want %q", tc.lib, got, tc.want)
		}
	}
	for name, want := range map[string]Kind{"MTL0": Metal, "Metal": Metal, "CUDA1": CUDA, "Vulkan0": Vulkan, "CPU": CPU, "BLAS": CPU} {
		if got := deviceKind(name); got != want {
			t.Errorf("deviceKind(%s) = %q, want %q", name, got, want)
		}
	}
}
