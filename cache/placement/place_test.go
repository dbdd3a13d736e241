package placement

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/probe"
)

const mb = 1 << 20

// machine is a fake probe: GPUs of the given kinds and sizes, all usable.
func machine(gpus ...probe.GPU) probe.Info {
	r := probe.Readings{
		GOOS: "linux", Memory: probe.MemoryInfo{TotalBytes: 64 << 30},
		GPU:  map[probe.Kind]probe.GPUReading{probe.Metal: {Unsupported: true}},
		GGML: map[probe.Kind]bool{probe.CUDA: true, probe.Vulkan: true},
	}
	for _, g := range gpus {
		rd := r.GPU[g.Kind]
		rd.Devices = append(rd.Devices, g)
		r.GPU[g.Kind] = rd
	}
	for _, k := range []probe.Kind{probe.CUDA, probe.Vulkan} {
		if _, ok := r.GPU[k]; !ok {
			r.GPU[k] = probe.GPUReading{LibMissing: "lib"}
		}
	}
	return probe.Decide(r)
}

func cuda(i int, total uint64) probe.GPU {
	return probe.GPU{Kind: probe.CUDA, Name: "Test GPU", TotalBytes: total, NativeIndex: i, UUID: "GPU-" + string(rune('a'+i))}
}

// fakeGPUs is the injected free-memory reading and the cache's accounting.
type fakeGPUs struct {
	free map[string]int64 // absent: the device cannot tell
	used map[string]int64
}

func (f *fakeGPUs) read(g probe.GPU) (uint64, bool, error) {
	n, ok := f.free[g.ID()]
	return uint64(n), ok, nil
}

func (f *fakeGPUs) planner(info probe.Info, budgets map[string]int64, tasks ...string) *Planner {
	if tasks == nil {
		tasks = []string{"chat", "embed"}
	}
	return New(Config{Info: info, GPUTasks: tasks, VRAM: budgets, FreeVRAM: f.read,
		Used: func() map[string]int64 { return f.used }, Log: slog.New(slog.DiscardHandler)})
}

// testModel writes a GGUF of layers blocks and returns its placement input.
func testModel(t *testing.T, layers int) Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := ggufgen.WriteFile(path, ggufgen.Options{Embd: 256, Layers: layers, Heads: 8, HeadsKV: 2, Context: 4096}); err != nil {
		t.Fatal(err)
	}
	return Model{ID: "m", Task: "chat", Format: GGUF, Path: path, ContextSize: 4096, Slots: 4, BatchSize: 512}
}

// vramAt is the model's VRAM with n layers on a GPU of kind k.
func vramAt(t *testing.T, m Model, n int, k probe.Kind) int64 {
	t.Helper()
	var files ggufFiles
	gf, err := files.get(m.Path, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := newGGUFShape(gf, m.ContextSize, m.Slots, m.BatchSize)
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.estimate(n, k)
	if err != nil {
		t.Fatal(err)
	}
	return e.VRAM.Total()
}

func place(t *testing.T, p *Planner, m Model) Plan {
	t.Helper()
	plan, err := p.Place(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func TestPlaceGGUFBestFit(t *testing.T) {
	m := testModel(t, 8)
	layers := 9
	full := vramAt(t, m, layers, probe.CUDA)
	g0, g1 := cuda(0, 80<<30), cuda(1, 80<<30)
	two := machine(g0, g1)
	budget := func(a, b int64) map[string]int64 { return map[string]int64{"cuda:0": a, "cuda:1": b} }

	cases := []struct {
		name    string
		info    probe.Info
		budgets map[string]int64
		gpus    fakeGPUs
		tasks   []string
		device  string
		layers  int // llama.cpp n_gpu_layers: -1 all
		reason  string
	}{
		{"one GPU, fits", machine(g0), map[string]int64{"cuda:0": 2 * full}, fakeGPUs{}, nil, "cuda:0", -1, "fits in the free VRAM"},
		{"not always the first: the most free room", two, budget(4*full, 4*full),
			fakeGPUs{free: map[string]int64{"cuda:0": 2 * full, "cuda:1": 3 * full}}, nil, "cuda:1", -1, "cuda:1"},
		{"GPU 0 held by the cache: GPU 1", two, budget(2*full, 2*full),
			fakeGPUs{used: map[string]int64{"cuda:0": full + full/2}}, nil, "cuda:1", -1, "fits in the free VRAM"},
		{"GPU 0 held by another process: GPU 1", two, budget(2*full, 2*full),
			fakeGPUs{free: map[string]int64{"cuda:0": full / 2, "cuda:1": 2 * full}}, nil, "cuda:1", -1, "fits in the free VRAM"},
		{"fits only after unloading idle models", two, budget(2*full, full/2),
			fakeGPUs{used: map[string]int64{"cuda:0": 2 * full}}, nil, "cuda:0", -1, "once idle models there are unloaded"},
		{"larger than any GPU: split on the one that holds more", two, budget(vramAt(t, m, 3, probe.CUDA), vramAt(t, m, 5, probe.CUDA)+1),
			fakeGPUs{}, nil, "cuda:1", 5, "split: 5 of 9 layers"},
		{"not one layer fits: CPU", two, budget(vramAt(t, m, 1, probe.CUDA)-1, 100*mb),
			fakeGPUs{}, nil, "cpu", 0, "not one layer fits"},
		{"off the allowlist", machine(g0), map[string]int64{"cuda:0": 4 * full}, fakeGPUs{}, []string{"embed"}, "cpu", 0, "not on the GPU allowlist"},
		{"no GPU", machine(), nil, fakeGPUs{}, nil, "cpu", 0, "no usable GPU"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := place(t, tc.gpus.planner(tc.info, tc.budgets, tc.tasks...), m)
			if plan.Device != tc.device || plan.GPULayers != tc.layers || !strings.Contains(plan.Reason, tc.reason) {
				t.Fatalf("device %s, layers %d (%s); want %s, %d, a reason with %q", plan.Device, plan.GPULayers, plan.Reason, tc.device, tc.layers, tc.reason)
			}
			if plan.RAM != plan.Estimate.RAM.Total() || plan.VRAM != plan.Estimate.VRAM.Total() || plan.CPURAM < plan.RAM {
				t.Fatalf("plan sizes %d/%d (CPU %d) do not add up to the estimate %+v", plan.RAM, plan.VRAM, plan.CPURAM, plan.Estimate)
			}
			switch {
			case tc.device == "cpu":
				if plan.VRAM != 0 || plan.Env != nil || plan.Share != 0 {
					t.Fatalf("CPU plan with VRAM %d, env %v, share %g", plan.VRAM, plan.Env, plan.Share)
				}
			case tc.layers == -1:
				if plan.VRAM != full || plan.Share != 1 {
					t.Fatalf("full offload VRAM %d share %g, want %d and 1", plan.VRAM, plan.Share, full)
				}
			default:
				if b := tc.budgets[tc.device]; plan.VRAM > b || vramAt(t, m, tc.layers+1, probe.CUDA) <= b {
					t.Fatalf("split of %d layers holds %d of VRAM in a budget of %d: not the most that fits", tc.layers, plan.VRAM, b)
				}
				if want := float64(tc.layers) / float64(layers); plan.Share != want {
					t.Fatalf("share %g, want %g", plan.Share, want)
				}
			}
			if tc.device != "cpu" {
				uuid := "GPU-" + string(rune('a'+tc.device[len(tc.device)-1]-'0'))
				if !slices.Contains(plan.Env, "CUDA_VISIBLE_DEVICES="+uuid) {
					t.Fatalf("env %v does not point the runner at %s (%s)", plan.Env, tc.device, uuid)
				}
			}
		})
	}
}

// Offloading puts weights and KV on the GPU and takes them off the host.
func TestPlaceGGUFMovesMemory(t *testing.T) {
	m := testModel(t, 4)
	f := fakeGPUs{}
	cpu := place(t, f.planner(machine(), nil), m)
	gpu := place(t, f.planner(machine(cuda(0, 80<<30)), map[string]int64{"cuda:0": 8 << 30}), m)
	if gpu.VRAM <= DeviceOverhead(probe.CUDA) || gpu.Estimate.VRAM.KV != cpu.Estimate.RAM.KV {
		t.Fatalf("full offload VRAM %+v: want the whole KV cache (%d) and more than the device context", gpu.Estimate.VRAM, cpu.Estimate.RAM.KV)
	}
	if gpu.RAM >= cpu.RAM || gpu.Estimate.RAM.KV != 0 || gpu.CPURAM != cpu.RAM {
		t.Fatalf("host RAM on the GPU %+v, on the CPU %+v (fallback %d)", gpu.Estimate.RAM, cpu.Estimate.RAM, gpu.CPURAM)
	}
}

// A Vulkan device that cannot report its free memory counts against the
// budget less what the cache holds; the runner is pointed at its own index.
func TestPlaceVulkanWithoutFreeReading(t *testing.T) {
	m := testModel(t, 4)
	full := vramAt(t, m, 5, probe.Vulkan)
	v := probe.GPU{Kind: probe.Vulkan, Name: "Radeon", TotalBytes: 16 << 30, NativeIndex: 2, Type: "discrete"}
	f := fakeGPUs{used: map[string]int64{"vulkan:0": full}}
	plan := place(t, f.planner(machine(v), map[string]int64{"vulkan:0": 2 * full}), m)
	if plan.Device != "vulkan:0" || plan.GPULayers != -1 || !slices.Equal(plan.Env, []string{"GGML_VK_VISIBLE_DEVICES=2", "CUDA_VISIBLE_DEVICES="}) {
		t.Fatalf("plan %s layers %d env %v", plan.Device, plan.GPULayers, plan.Env)
	}
	f.used["vulkan:0"] = full + 1
	if plan := place(t, f.planner(machine(v), map[string]int64{"vulkan:0": 2 * full}), m); !strings.Contains(plan.Reason, "once idle models") {
		t.Fatalf("with the budget held: %s", plan.Reason)
	}
}

func TestPlaceONNX(t *testing.T) {
	embed := Model{ID: "e", Task: "embed", Format: ONNX, Size: 100 * mb}
	vk := probe.GPU{Kind: probe.Vulkan, Name: "Radeon", TotalBytes: 16 << 30}
	cases := []struct {
		name    string
		info    probe.Info
		budgets map[string]int64
		free    map[string]int64
		m       Model
		device  string
		ram     int64
		vram    int64
	}{
		{"CPU", machine(), nil, nil, embed, "cpu", 232 * mb, 0},
		{"CPU with lanes", machine(), nil, nil, Model{ID: "e", Task: "embed", Format: ONNX, Size: 100 * mb, Lanes: true}, "cpu", 332 * mb, 0},
		{"Vulkan only: ONNX Runtime cannot use it", machine(vk), map[string]int64{"vulkan:0": 8 << 30}, nil, embed, "cpu", 232 * mb, 0},
		{"CUDA: the most free room", machine(cuda(0, 8<<30), cuda(1, 8<<30)), map[string]int64{"cuda:0": 4 << 30, "cuda:1": 4 << 30},
			map[string]int64{"cuda:0": 1 << 30, "cuda:1": 3 << 30}, embed, "cuda:1", 32 * mb, 200 * mb},
		{"too large for the GPU: not split", machine(cuda(0, 8<<30)), map[string]int64{"cuda:0": 150 * mb}, nil, embed, "cpu", 232 * mb, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeGPUs{free: tc.free}
			plan := place(t, f.planner(tc.info, tc.budgets), tc.m)
			if plan.Device != tc.device || plan.RAM != tc.ram || plan.VRAM != tc.vram || plan.Env != nil {
				t.Fatalf("plan %s RAM %d VRAM %d env %v (%s); want %s %d %d", plan.Device, plan.RAM, plan.VRAM, plan.Env, plan.Reason, tc.device, tc.ram, tc.vram)
			}
		})
	}
}

func TestPlaceRefusesBadInput(t *testing.T) {
	f := fakeGPUs{}
	p := f.planner(machine(), nil)
	bad := filepath.Join(t.TempDir(), "x.gguf")
	for name, m := range map[string]Model{
		"unknown format": {ID: "x", Format: "safetensors"},
		"no slots":       {ID: "x", Format: GGUF, Path: bad, ContextSize: 10},
		"missing file":   {ID: "x", Format: GGUF, Path: bad, ContextSize: 10, Slots: 1},
	} {
		if _, err := p.Place(context.Background(), m); err == nil || !strings.Contains(err.Error(), `"x"`) {
			t.Errorf("%s: err = %v, want an error naming the model", name, err)
		}
	}
}

func TestBudgets(t *testing.T) {
	info := machine(cuda(0, 10<<30), probe.GPU{Kind: probe.CUDA, Name: "unknown size"})
	ram, vram := Budgets(info, 0, 0)
	if total := float64(64 << 30); ram != int64(total*RAMShare) || len(vram) != 1 || vram["cuda:0"] != 9<<30 {
		t.Fatalf("automatic budgets: %d, %v", ram, vram)
	}
	if ram, vram := Budgets(info, 5<<30, 3<<30); ram != 5<<30 || vram["cuda:0"] != 3<<30 {
		t.Fatalf("set budgets: %d, %v", ram, vram)
	}
	if _, vram := Budgets(machine(), 0, 0); vram != nil {
		t.Fatalf("no GPU: %v", vram)
	}
}
