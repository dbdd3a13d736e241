package placement_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/cache/placement"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/probe"
)

// fakeMachine is a probe of CUDA GPUs whose free memory is their size less
// what the loaded fake instances allocated, read fresh at every fit.
type fakeMachine struct {
	mu    sync.Mutex
	info  probe.Info
	total map[string]int64
	alloc map[string]int64
}

func newFakeMachine(sizes ...uint64) *fakeMachine {
	r := probe.Readings{
		GOOS: "linux", Memory: probe.MemoryInfo{TotalBytes: 64 << 30},
		GPU:  map[probe.Kind]probe.GPUReading{probe.Vulkan: {LibMissing: "libvulkan.so.1"}, probe.Metal: {Unsupported: true}},
		GGML: map[probe.Kind]bool{probe.CUDA: true},
	}
	var devs []probe.GPU
	for i, s := range sizes {
		devs = append(devs, probe.GPU{Name: "Test GPU", TotalBytes: s, NativeIndex: i})
	}
	r.GPU[probe.CUDA] = probe.GPUReading{Devices: devs}
	m := &fakeMachine{info: probe.Decide(r), total: map[string]int64{}, alloc: map[string]int64{}}
	for _, g := range m.info.GPUs {
		m.total[g.ID()] = int64(g.TotalBytes)
	}
	return m
}

func (m *fakeMachine) free(g probe.GPU) (uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return uint64(m.total[g.ID()] - m.alloc[g.ID()]), true, nil
}

func (m *fakeMachine) allocate(dev string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.alloc[dev] += n
}

// chatInst is a loaded model that, like the real runner, reports its device
// but no VRAM measurement.
type chatInst struct {
	plan placement.Plan
	m    *fakeMachine
	once sync.Once
}

func (c *chatInst) Close() error {
	c.once.Do(func() { c.m.allocate(c.plan.Device, -c.plan.VRAM) })
	return nil
}
func (c *chatInst) Size() int64 { return c.plan.RAM }
func (c *chatInst) Slots() int  { return 1 }
func (c *chatInst) Placement() cache.Placement {
	return cache.Placement{Device: c.plan.Device, GPUShare: c.plan.Share}
}

// recorder keeps the planner's log records.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, b.String())
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msgs[len(r.msgs)-1]
}

// rig is a planner and a cache over a fake machine, as cmd/modeld wires them.
type rig struct {
	t      *testing.T
	m      *fakeMachine
	c      *cache.Cache
	models map[string]placement.Model
	log    *recorder
}

func newRig(t *testing.T, m *fakeMachine, vram map[string]int64, models map[string]placement.Model) *rig {
	r := &rig{t: t, m: m, models: models, log: &recorder{}}
	var p *placement.Planner
	resolve := func(ctx context.Context, id string) (cache.Spec, error) {
		plan, err := p.Place(ctx, r.models[id])
		if err != nil {
			return cache.Spec{}, err
		}
		return cache.Spec{ID: id, Device: plan.Device, GPUShare: plan.Share, RAM: plan.RAM, VRAM: plan.VRAM, Estimate: plan.Estimate, Data: plan}, nil
	}
	load := func(_ context.Context, s cache.Spec) (cache.Instance, error) {
		plan := s.Data.(placement.Plan)
		m.allocate(plan.Device, plan.VRAM)
		return &chatInst{plan: plan, m: m}, nil
	}
	cfg := cache.DefaultConfig()
	cfg.KeepAlive = -1
	cfg.VRAM = vram
	c, err := cache.New(cfg, resolve, load, cache.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	p = placement.New(placement.Config{Info: m.info, GPUTasks: []string{"chat"}, VRAM: vram, FreeVRAM: m.free, Used: c.VRAMUsed, Log: slog.New(r.log)})
	r.c = c
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return r
}

func (r *rig) use(id string) cache.ModelStatus {
	r.t.Helper()
	h, err := r.c.Acquire(context.Background(), id, cache.AcquireOptions{})
	if err != nil {
		r.t.Fatalf("acquire %s: %v", id, err)
	}
	h.Release()
	for _, st := range r.c.Snapshot().Models {
		if st.ID == id && st.State == "ready" {
			return st
		}
	}
	r.t.Fatalf("%s not loaded after use", id)
	return cache.ModelStatus{}
}

func (r *rig) unload(id string) {
	r.t.Helper()
	if err := r.c.Unload(context.Background(), id, true); err != nil {
		r.t.Fatalf("unload %s: %v", id, err)
	}
}

// check asserts the cache's VRAM per GPU is the sum of the loaded models'
// estimates, and that the fake device saw exactly that allocated.
func (r *rig) check(step string, want map[string]int64) {
	r.t.Helper()
	s := r.c.Snapshot()
	sum := map[string]int64{}
	for _, st := range s.Models {
		sum[st.Device] += st.VRAMBytes
		if est, ok := st.Estimate.(placement.Estimate); !ok || est.VRAM.Total() != st.VRAMBytes {
			r.t.Fatalf("%s: %s holds %d of VRAM, its estimate %+v", step, st.ID, st.VRAMBytes, st.Estimate)
		}
	}
	for dev, u := range s.VRAM {
		if u.UsedBytes != want[dev] || u.UsedBytes != sum[dev] || r.m.alloc[dev] != want[dev] {
			r.t.Fatalf("%s: %s has %d of VRAM accounted (models' estimates %d, device %d), want %d",
				step, dev, u.UsedBytes, sum[dev], r.m.alloc[dev], want[dev])
		}
	}
}

func genModel(t *testing.T, id string, o ggufgen.Options) placement.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), id+".gguf")
	if err := ggufgen.WriteFile(path, o); err != nil {
		t.Fatal(err)
	}
	return placement.Model{ID: id, Task: "chat", Format: placement.GGUF, Path: path, Digest: "sha256:" + id, ContextSize: 2048, Slots: 2, BatchSize: 512}
}

// fullVRAM is what a model needs with every layer on a GPU.
func fullVRAM(t *testing.T, m placement.Model) int64 {
	t.Helper()
	big := newFakeMachine(1 << 40)
	p := placement.New(placement.Config{Info: big.info, GPUTasks: []string{"chat"}, FreeVRAM: big.free, Log: slog.New(slog.DiscardHandler)})
	plan, err := p.Place(context.Background(), m)
	if err != nil || plan.GPULayers != -1 {
		t.Fatalf("plan %+v, %v", plan, err)
	}
	return plan.VRAM
}

// Two GPUs: each load goes to the GPU with the most room (not always the
// first); the accounted VRAM is the sum of the estimates after every load
// and unload, and 0 at the end. A model that does not fit on GPU 0 goes to
// GPU 1.
func TestAccountingTwoGPUs(t *testing.T) {
	models := map[string]placement.Model{}
	for _, id := range []string{"a", "b", "c"} {
		models[id] = genModel(t, id, ggufgen.Options{Embd: 128, Layers: 4, Heads: 8, HeadsKV: 2})
	}
	models["big"] = genModel(t, "big", ggufgen.Options{Embd: 256, Layers: 4, Heads: 8, HeadsKV: 8, Context: 16384})
	bm := models["big"]
	bm.ContextSize = 16384
	models["big"] = bm
	small, big := fullVRAM(t, models["a"]), fullVRAM(t, models["big"])
	budget := map[string]int64{"cuda:0": small * 14 / 10, "cuda:1": small * 26 / 10}
	if big <= budget["cuda:0"] || big > budget["cuda:1"] {
		t.Fatalf("the big model (%d) must fit on GPU 1 only (budgets %v)", big, budget)
	}
	m := newFakeMachine(uint64(budget["cuda:0"]*2), uint64(budget["cuda:1"]*2))
	r := newRig(t, m, budget, models)

	steps := []struct {
		use, unload string
		device      string
		want        map[string]int64
	}{
		{use: "a", device: "cuda:1", want: map[string]int64{"cuda:1": small}}, // 2.6 > 1.4 small models of room
		{use: "b", device: "cuda:1", want: map[string]int64{"cuda:1": 2 * small}},
		{use: "c", device: "cuda:0", want: map[string]int64{"cuda:0": small, "cuda:1": 2 * small}}, // does not fit on GPU 1 now
		{unload: "a", want: map[string]int64{"cuda:0": small, "cuda:1": small}},
		{unload: "b", want: map[string]int64{"cuda:0": small}},
		{use: "big", device: "cuda:1", want: map[string]int64{"cuda:0": small, "cuda:1": big}}, // GPU 0 cannot hold it at all
		{unload: "c", want: map[string]int64{"cuda:1": big}},
		{unload: "big", want: map[string]int64{}},
	}
	for _, st := range steps {
		name := "unload " + st.unload
		if st.use != "" {
			name = "use " + st.use
			if ms := r.use(st.use); ms.Device != st.device || ms.GPUShare != 1 {
				t.Fatalf("%s: on %s (share %g), want all of it on %s; %s", name, ms.Device, ms.GPUShare, st.device, r.log.last())
			}
		} else {
			r.unload(st.unload)
		}
		r.check(name, st.want)
	}
	if s := r.c.Snapshot(); len(s.Models) != 0 || s.VRAM["cuda:0"].UsedBytes != 0 || s.VRAM["cuda:1"].UsedBytes != 0 {
		t.Fatalf("after unloading everything: %+v", s)
	}
}

// One GPU: a model larger than the GPU is split to what its budget holds
// (unloading the idle model there), one too large for a single layer runs
// on the CPU, and the log says why with the numbers.
func TestAccountingOneGPU(t *testing.T) {
	models := map[string]placement.Model{
		"small": genModel(t, "small", ggufgen.Options{Embd: 128, Layers: 4, Heads: 8, HeadsKV: 2}),
		"large": genModel(t, "large", ggufgen.Options{Embd: 256, Layers: 8, Heads: 8, HeadsKV: 8, Context: 8192}),
	}
	small, large := fullVRAM(t, models["small"]), fullVRAM(t, models["large"])
	budget := map[string]int64{"cuda:0": (small + large) / 2}
	if budget["cuda:0"] >= large {
		t.Fatalf("budget %d holds the large model (%d)", budget["cuda:0"], large)
	}
	m := newFakeMachine(uint64(budget["cuda:0"] * 2))
	r := newRig(t, m, budget, models)

	r.use("small")
	r.check("small", map[string]int64{"cuda:0": small})
	st := r.use("large")
	if st.Device != "cuda:0" || st.GPUShare <= 0 || st.GPUShare >= 1 || st.VRAMBytes > budget["cuda:0"] {
		t.Fatalf("large: %+v, want a split inside the %d budget", st, budget["cuda:0"])
	}
	if msg := r.log.last(); !strings.Contains(msg, "split:") || !strings.Contains(msg, "MiB") {
		t.Fatalf("log: %s", msg)
	}
	r.check("large (small unloaded for it)", map[string]int64{"cuda:0": st.VRAMBytes})
	r.unload("large")
	r.check("none", map[string]int64{})

	// With less VRAM than one layer needs, the model runs on the CPU.
	tiny := map[string]int64{"cuda:0": small / 2}
	r2 := newRig(t, newFakeMachine(uint64(small)), tiny, models)
	if st := r2.use("large"); st.Device != "cpu" || st.VRAMBytes != 0 {
		t.Fatalf("large on %s with %d of VRAM, want the CPU", st.Device, st.VRAMBytes)
	}
	if msg := r2.log.last(); !strings.Contains(msg, "not one layer fits") || !strings.Contains(msg, "MiB") {
		t.Fatalf("log: %s", msg)
	}
	r2.check("cpu", map[string]int64{})
}
