package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama"
	"github.com/modeld/modeld/backends/onnx"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/pipelines"
)

// crashDir is the home's directory of runner crash reports (the Go
// runtime's dumps of runners that died, named in the daemon's log).
const crashDir = "crash"

// promptCacheDir is the home's directory of the on-disk prompt cache
// (backends/llama/promptcache): private to the daemon's user.
const promptCacheDir = "kvcache"

// promptCache is the llama backend's prompt cache settings for a model
// whose file has digest ("sha256:<hex>"); none when the setting is off.
func promptCache(cfg Config, digest string) llama.PromptCache {
	if !cfg.PromptCache {
		return llama.PromptCache{}
	}
	return llama.PromptCache{Dir: filepath.Join(cfg.Home, promptCacheDir), MaxBytes: cfg.PromptCacheSize,
		ModelSHA256: strings.TrimPrefix(digest, "sha256:")}
}

type loaderFunc = func(context.Context, cache.Spec, *loadPlan) (cache.Instance, error)

// backendLoaders returns the loader of each backend, keyed by cache.Spec.Backend.
// Loads that wanted a GPU and fell back to the CPU are recorded in fallbacks.
// cpuVariant is the ggml CPU variant the probe saw llama.cpp keep ("": not
// known), which runners then load alone.
func backendLoaders(cfg Config, log *slog.Logger, libs backends.Libs, cpuVariant string, fallbacks *gpuFallbacks, metrics *pipelineMetrics) map[string]loaderFunc {
	o := &onnxLoader{cfg: cfg, log: log, libs: libs, fallbacks: fallbacks, metrics: metrics}
	return map[string]loaderFunc{
		"llama": func(ctx context.Context, spec cache.Spec, plan *loadPlan) (cache.Instance, error) {
			return loadChat(ctx, cfg, log, libs, cpuVariant, fallbacks, metrics.chat, spec, plan)
		},
		"onnx": o.load,
	}
}

// gpuFallbacks remembers, per model, why a load meant for a GPU runs on the CPU;
// GET /v1/system shows it.
type gpuFallbacks struct {
	mu      sync.Mutex
	reasons map[string]gpuFallback
}

type gpuFallback struct {
	Device string    `json:"wanted_device"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

func (f *gpuFallbacks) set(id, device, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reasons == nil {
		f.reasons = map[string]gpuFallback{}
	}
	if reason == "" {
		delete(f.reasons, id)
		return
	}
	f.reasons[id] = gpuFallback{Device: device, Reason: reason, At: time.Now()}
}

func (f *gpuFallbacks) snapshot() any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]gpuFallback, len(f.reasons))
	for k, v := range f.reasons {
		out[k] = v
	}
	return out
}

// chatInstance is a generating model (the llama backend's runner process)
// as the cache holds it: the backend's model plus where it runs and what it
// costs. The API handlers reach the model through Backend.
type chatInstance struct {
	model    backends.Model
	device   string
	gpuShare float64
	ram      int64 // the placement's RAM estimate for where it runs
	id       string
	metrics  *chatMetrics // counts its generations (metrics.go)
}

var (
	_ cache.Occupant  = (*chatInstance)(nil)
	_ cache.Instance  = (*chatInstance)(nil)
	_ cache.Mortal    = (*chatInstance)(nil)
	_ cache.Ailing    = (*chatInstance)(nil)
	_ cache.Placed    = (*chatInstance)(nil)
	_ backends.Holder = (*chatInstance)(nil)
	_ backends.Model  = (*chatInstance)(nil)
)

// Backend is the loaded model.
func (c *chatInstance) Backend() backends.Model { return c.model }

// Info is the model's description.
func (c *chatInstance) Info() backends.Info { return c.model.Info() }

// Close unloads the model, counting its last generations first.
func (c *chatInstance) Close() error {
	c.metrics.unloading(c)
	return c.model.Close()
}

// never is the Done channel of a model that cannot die on its own.
var never = make(chan struct{})

// Done is closed when the model's process dies on its own.
func (c *chatInstance) Done() <-chan struct{} {
	if m, ok := c.model.(cache.Mortal); ok {
		return m.Done()
	}
	return never
}

// Health says whether the model's process answers (cache.Ailing): a
// runner that is stopped or hung is refused at once, with a 503, until its
// watchdog replaces it.
func (c *chatInstance) Health() (<-chan struct{}, error) {
	if a, ok := c.model.(cache.Ailing); ok {
		return a.Health()
	}
	return never, nil
}

// Err says why the model died.
func (c *chatInstance) Err() error {
	if m, ok := c.model.(cache.Mortal); ok {
		return m.Err()
	}
	return nil
}

// Size is the RAM estimate, or the runner's RSS when that is larger. The
// cache reads it once, right after the load, when an mmap'd model has
// touched few of its pages: an RSS sample alone would count a fraction of
// the weights and let the budget overfill as they are read.
func (c *chatInstance) Size() int64 {
	r, ok := c.model.(interface{ RSS() (uint64, error) })
	if !ok {
		return c.ram
	}
	rss, err := r.RSS()
	if err != nil {
		return c.ram
	}
	return max(c.ram, int64(rss))
}

func (c *chatInstance) Slots() int { return c.model.Info().Slots }

// Placement is where the runner really loaded the model. It carries no VRAM
// measurement, so the cache keeps the placement's estimate (0 on the CPU).
func (c *chatInstance) Placement() cache.Placement {
	return cache.Placement{Device: c.device, GPUShare: c.gpuShare}
}

// loadChat loads a generating model with the backend the registry holds
// under spec.Backend.
func loadChat(ctx context.Context, cfg Config, log *slog.Logger, libs backends.Libs, cpuVariant string, fallbacks *gpuFallbacks, metrics *chatMetrics, spec cache.Spec, plan *loadPlan) (cache.Instance, error) {
	opts := llama.LoadOptions{LogLevel: logLevel(cfg), StallTimeout: cfg.StallTimeout, CrashDir: filepath.Join(cfg.Home, crashDir),
		PromptCache: promptCache(cfg, plan.digest), Lookup: cfg.Lookup, ReuseAnswers: cfg.ReuseAnswers, Projector: plan.projector, CPUVariant: cpuVariant}
	if len(cfg.RunnerWrapper) > 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("load %s: find own executable for --runner-wrapper: %w", spec.ID, err)
		}
		opts.Command = append(slices.Clone(cfg.RunnerWrapper), exe, "runner")
	}
	ls := backends.LoadSpec{
		ID:           spec.ID,
		Path:         plan.path,
		Task:         plan.task,
		LibRoot:      libs.Root,
		ContextSize:  plan.contextSize,
		ContextCap:   cfg.ContextSize,
		Slots:        cfg.ChatSlots,
		Threads:      cfg.Threads,
		BatchThreads: cfg.BatchThreads,
		QueueLimit:   cfg.QueueSize,
		Logger:       log.With("model", spec.ID),
		Options:      opts,
	}
	if plan.useGPU {
		ls.UseGPU, ls.GPU, ls.Device, ls.GPULayers = true, plan.place.GPU.NativeIndex, spec.Device, plan.gpuLayers
		ls.Env = plan.place.Env // shows the runner its GPU and no other
	}
	m, err := backends.Load(ctx, spec.Backend, ls)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", spec.ID, err)
	}
	inst := &chatInstance{model: m, device: "cpu", ram: plan.place.CPURAM, id: spec.ID, metrics: metrics}
	metrics.loaded(inst)
	info := m.Info()
	if info.Device != "cpu" && info.GPUFallback == "" {
		inst.device, inst.gpuShare, inst.ram = spec.Device, spec.GPUShare, spec.RAM
	} else if info.GPUFallback != "" {
		log.Warn("GPU load failed; the model runs on the CPU", "model", spec.ID, "reason", info.GPUFallback)
	}
	if plan.useGPU {
		fallbacks.set(spec.ID, spec.Device, info.GPUFallback)
	}
	return inst, nil
}

// onnxLoader creates ONNX Runtime pipelines; the runtime environment is made once,
// on the first load.
type onnxLoader struct {
	cfg       Config
	log       *slog.Logger
	libs      backends.Libs
	fallbacks *gpuFallbacks
	metrics   *pipelineMetrics

	once sync.Once
	rt   *onnx.Runtime
	err  error
}

// pipelineInstance is a loaded ONNX pipeline as the cache holds it: the
// pipeline (a backends.Model with its task's capability) plus where it runs
// and what it costs. The API handlers reach the pipeline through Backend.
type pipelineInstance struct {
	pipelines.Pipeline
	slots  int
	device string // the planned GPU id, or "cpu"
	ram    int64  // the placement's RAM estimate for where it runs
}

var (
	_ cache.Instance  = (*pipelineInstance)(nil)
	_ cache.Placed    = (*pipelineInstance)(nil)
	_ backends.Holder = (*pipelineInstance)(nil)
)

func (p *pipelineInstance) Slots() int { return p.slots }

// Backend is the loaded pipeline.
func (p *pipelineInstance) Backend() backends.Model { return p.Pipeline }

// Placement is the planned GPU, or the CPU when the pipeline runs there (a
// CUDA session that could not be made). No VRAM measurement: the cache keeps
// the estimate.
func (p *pipelineInstance) Placement() cache.Placement {
	if p.Device() == "cpu" {
		return cache.Placement{Device: "cpu"}
	}
	return cache.Placement{Device: p.device, GPUShare: 1}
}

// Size is the placement's RAM estimate (see placement's ONNX rule of thumb).
func (p *pipelineInstance) Size() int64 { return p.ram }

func (o *onnxLoader) load(_ context.Context, spec cache.Spec, plan *loadPlan) (cache.Instance, error) {
	o.once.Do(func() { o.rt, o.err = onnx.Init(o.libs.ONNXRuntimePath()) })
	if o.err != nil {
		return nil, o.err
	}
	name := plan.task
	if name == backends.TaskZeroShot {
		name = backends.TaskClassify // a classifier serves zero-shot through its NLI labels
	}
	task, err := pipelines.ParseTask(name)
	if err != nil {
		return nil, err
	}
	p, err := pipelines.Load(task, plan.dir, pipelines.Options{
		Runtime:     o.rt,
		UseGPU:      plan.useGPU,
		CUDADevice:  plan.place.GPU.NativeIndex,
		GPUName:     spec.Device,
		Threads:     o.cfg.Threads,
		BatchTokens: o.cfg.BatchTokens,
		BatchWait:   o.cfg.BatchWait,
		Lanes:       o.cfg.Lanes,
		OnPass:      o.metrics.observer(spec.ID),
		Logger:      o.log.With("model", spec.ID),
	})
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", spec.ID, err)
	}
	if r := p.FallbackReason(); r != "" {
		o.log.Warn("GPU unavailable for this pipeline; it runs on the CPU", "model", spec.ID, "reason", r)
	}
	if plan.useGPU {
		o.fallbacks.set(spec.ID, spec.Device, p.FallbackReason())
	}
	// Requests are merged by the pipeline's batcher, so many may be in flight;
	// the batcher holds as many as these slots, so only the cache refuses.
	inst := &pipelineInstance{Pipeline: p, slots: pipelines.MaxInFlight, device: spec.Device, ram: spec.RAM}
	if p.Device() == "cpu" {
		inst.ram = plan.place.CPURAM
	}
	return inst, nil
}

func logLevel(cfg Config) slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(cfg.LogLevel))
	return l
}

// tasks is api.Options.Tasks: the tasks the store's manifest of id lists, read
// without loading the model.
func (r *runtime) tasks(id string) ([]string, error) {
	m, err := r.store.Get(id)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(m.Tasks))
	for i, t := range m.Tasks {
		out[i] = string(t)
	}
	return out, nil
}
