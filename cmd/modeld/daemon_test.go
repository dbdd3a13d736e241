package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	"github.com/modeld/modeld/cache/placement"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/probe"
)

// testRuntime imports the tiny chat model and the ONNX embed and summarize
// fixtures into a fresh store and returns a runtime seeing info.
func testRuntime(t *testing.T, info probe.Info, cfg Config) *runtime {
	t.Helper()
	home := t.TempDir()
	st, err := models.Open(filepath.Join(home, "models"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gguf := filepath.Join(t.TempDir(), "chat.gguf")
	if err := ggufgen.WriteFile(gguf, ggufgen.Tiny(ggufgen.SPM)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for src, id := range map[string]string{gguf: "t/chat", "../../testdata/onnx/embed-mean": "t/embed", "../../testdata/onnx/summarize": "t/sum"} {
		if _, err := st.Import(ctx, src, models.ImportOptions{Name: id}, nil); err != nil {
			t.Fatalf("import %s: %v", src, err)
		}
	}
	cfg.Home = home
	if cfg.ContextSize == 0 {
		cfg.ContextSize, cfg.ChatSlots = 8192, 4
	}
	// The fake GPUs cannot report free memory: only the budgets count.
	return newRuntime(cfg, slog.Default(), st, info, func(probe.GPU) (uint64, bool, error) { return 0, false, nil })
}

func cudaInfo(total uint64) probe.Info {
	return probe.Decide(probe.Readings{
		GOOS:   "linux",
		Memory: probe.MemoryInfo{TotalBytes: 16 << 30},
		GPU: map[probe.Kind]probe.GPUReading{
			probe.CUDA:   {Devices: []probe.GPU{{Name: "Test GPU", TotalBytes: total}}},
			probe.Vulkan: {LibMissing: "libvulkan.so.1"},
			probe.Metal:  {Unsupported: true},
		},
		GGML: map[probe.Kind]bool{probe.CUDA: true},
	})
}

func TestResolvePlacement(t *testing.T) {
	allow := []string{"chat", "embed", "classify", "rerank"}
	cases := []struct {
		name      string
		info      probe.Info
		cfg       Config
		id        string
		device    string
		gpuLayers int
		share     float64
	}{
		{"no GPU", probe.Decide(probe.Readings{GOOS: "linux", Memory: probe.MemoryInfo{TotalBytes: 16 << 30}}), Config{GPUTasks: allow}, "t/chat", "cpu", 0, 0},
		{"chat fits on the GPU", cudaInfo(80 << 30), Config{GPUTasks: allow}, "t/chat", "cuda:0", -1, 1},
		{"chat off the allowlist", cudaInfo(80 << 30), Config{GPUTasks: []string{"embed"}}, "t/chat", "cpu", 0, 0},
		// 2 blocks and the output layer; a budget just below the whole model holds two of them.
		{"chat split", cudaInfo(80 << 30), Config{GPUTasks: allow, VRAMBudget: -1}, "t/chat", "cuda:0", 2, 2.0 / 3},
		{"embed on the GPU", cudaInfo(80 << 30), Config{GPUTasks: allow}, "t/embed", "cuda:0", 0, 1},
		{"summarize off by default", cudaInfo(80 << 30), Config{GPUTasks: allow}, "t/sum", "cpu", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if cfg.VRAMBudget == -1 {
				// Size the budget from this model's own estimate.
				cfg.VRAMBudget = 0
				spec, err := testRuntime(t, tc.info, cfg).resolve(context.Background(), tc.id)
				if err != nil {
					t.Fatal(err)
				}
				cfg.VRAMBudget = spec.VRAM - 1
			}
			rt := testRuntime(t, tc.info, cfg)
			spec, err := rt.resolve(context.Background(), tc.id)
			if err != nil {
				t.Fatal(err)
			}
			plan := spec.Data.(*loadPlan)
			if spec.Device != tc.device || plan.gpuLayers != tc.gpuLayers || spec.GPUShare != tc.share {
				t.Fatalf("device %s layers %d share %g; want %s %d %g (%s)", spec.Device, plan.gpuLayers, spec.GPUShare, tc.device, tc.gpuLayers, tc.share, plan.place.Reason)
			}
			if spec.RAM <= 0 || spec.RAM != plan.place.Estimate.RAM.Total() || spec.VRAM != plan.place.Estimate.VRAM.Total() {
				t.Fatalf("spec RAM %d VRAM %d, estimate %+v", spec.RAM, spec.VRAM, plan.place.Estimate)
			}
			if on := spec.Device != "cpu"; on != (spec.VRAM > 0) || on != plan.useGPU {
				t.Fatalf("device %s with VRAM %d (use GPU %v)", spec.Device, spec.VRAM, plan.useGPU)
			}
			if budget := rt.cacheConfig().VRAM[spec.Device]; spec.VRAM > budget && spec.Device != "cpu" {
				t.Fatalf("VRAM %d over the budget %d", spec.VRAM, budget)
			}
			if spec.Backend == "llama" && plan.useGPU && !slices.Contains(plan.place.Env, "CUDA_VISIBLE_DEVICES=0") {
				t.Fatalf("runner env %v does not name the GPU", plan.place.Env)
			}
		})
	}
}

// The chat model's estimate counts its KV cache for the real context and
// slots: more slots, more RAM, by exactly the KV of the added cells.
func TestResolveKVForSlots(t *testing.T) {
	noGPU := probe.Decide(probe.Readings{GOOS: "linux", Memory: probe.MemoryInfo{TotalBytes: 16 << 30}})
	est := func(slots int) placement.Estimate {
		spec, err := testRuntime(t, noGPU, Config{ContextSize: 1024, ChatSlots: slots}).resolve(context.Background(), "t/chat")
		if err != nil {
			t.Fatal(err)
		}
		return spec.Estimate.(placement.Estimate)
	}
	one, four := est(1), est(4)
	if one.ContextCells != 1024 || four.ContextCells != 4096 || four.RAM.KV != 4*one.RAM.KV || one.RAM.KV == 0 {
		t.Fatalf("1 slot: %d cells, KV %d; 4 slots: %d cells, KV %d", one.ContextCells, one.RAM.KV, four.ContextCells, four.RAM.KV)
	}
}

func TestResolveCanonicalAndUnknown(t *testing.T) {
	rt := testRuntime(t, cudaInfo(0), Config{})
	spec, err := rt.resolve(context.Background(), "t/chat:latest")
	if err != nil || spec.ID != "t/chat" || spec.Backend != "llama" {
		t.Fatalf("spec = %+v, %v", spec, err)
	}
	if plan := spec.Data.(*loadPlan); plan.contextSize != 2048 {
		t.Fatalf("context = %d, want the trained 2048 below the 8192 cap", plan.contextSize)
	}
	if _, err := rt.resolve(context.Background(), "t/absent"); err == nil {
		t.Fatal("resolved a model that is not in the store")
	}
}

// A CPU encoder model with lanes holds a second session: its RAM estimate
// counts the weights once more. Summarization and --pipeline-lanes 1 hold one.
func TestResolveLanesRAM(t *testing.T) {
	noGPU := probe.Decide(probe.Readings{GOOS: "linux", Memory: probe.MemoryInfo{TotalBytes: 16 << 30}})
	ram := func(cfg Config, id string) int64 {
		t.Helper()
		spec, err := testRuntime(t, noGPU, cfg).resolve(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return spec.RAM
	}
	rt := testRuntime(t, noGPU, Config{})
	m, err := rt.store.Get("t/embed")
	if err != nil {
		t.Fatal(err)
	}
	off, on := ram(Config{Threads: 2, Lanes: 1}, "t/embed"), ram(Config{Threads: 2}, "t/embed")
	if on-off != m.Size() {
		t.Fatalf("RAM with lanes %d, without %d: want the difference to be the model's %d bytes", on, off, m.Size())
	}
	if a, b := ram(Config{Threads: 2, Lanes: 1}, "t/sum"), ram(Config{Threads: 2}, "t/sum"); a != b {
		t.Fatalf("summarize RAM %d with lanes on, %d off: it has no lanes", b, a)
	}
}
