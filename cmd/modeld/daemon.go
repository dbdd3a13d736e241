package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/cache/placement"
	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/pipelines"
	"github.com/modeld/modeld/probe"
)

// runtime joins the store, the probe and the backends into the cache's Resolver
// and Loader. Where a model runs and what it costs is the placement package's
// decision; the runtime only hands it the model and the settings.
type runtime struct {
	cfg     Config
	log     *slog.Logger
	store   *models.Store
	info    probe.Info
	libs    backends.Libs
	loaders map[string]func(ctx context.Context, spec cache.Spec, plan *loadPlan) (cache.Instance, error)
	planner *placement.Planner
	cache   atomic.Pointer[cache.Cache] // set once the cache exists: its accounted VRAM
}

// newRuntime returns a runtime whose planner re-reads free VRAM through read
// (nil: the probe's NVML reading).
func newRuntime(cfg Config, log *slog.Logger, store *models.Store, info probe.Info, read func(probe.GPU) (uint64, bool, error)) *runtime {
	r := &runtime{cfg: cfg, log: log, store: store, info: info}
	_, vram := placement.Budgets(info, cfg.RAMBudget, cfg.VRAMBudget)
	r.planner = placement.New(placement.Config{
		Info: info, GPUTasks: cfg.GPUTasks, VRAM: vram, FreeVRAM: read, Log: log,
		Used: func() map[string]int64 {
			if c := r.cache.Load(); c != nil {
				return c.VRAMUsed()
			}
			return nil
		},
	})
	return r
}

// loadPlan is what the Resolver found out and the Loader needs (cache.Spec.Data).
type loadPlan struct {
	manifest *models.Manifest
	task     string
	place    placement.Plan
	useGPU   bool // the plan puts the model on a GPU
	gpuKind  probe.Kind
	// gpuLayers is llama.cpp's n_gpu_layers: -1 all, 0 none.
	gpuLayers int
	// GGUF: the model file and the context per sequence.
	path        string
	digest      string // the model file's, "sha256:<hex>"
	contextSize int
	// projector is the model's multimodal projector file ("" for none).
	projector string
	// ONNX: a folder laid out as the model's files (links into the blob store).
	dir string
}

// cacheConfig turns the settings into the cache's limits.
func (r *runtime) cacheConfig() cache.Config {
	cc := cache.DefaultConfig()
	cc.KeepAlive = r.cfg.KeepAlive
	cc.MaxLoaded = r.cfg.MaxLoaded
	cc.QueueLen = r.cfg.QueueSize
	cc.MaxWait = r.cfg.LoadWait
	cc.RAM, cc.VRAM = placement.Budgets(r.info, r.cfg.RAMBudget, r.cfg.VRAMBudget)
	return cc
}

// resolve turns a model id into a load plan and its memory estimate.
func (r *runtime) resolve(ctx context.Context, id string) (cache.Spec, error) {
	m, err := r.store.Get(id)
	if err != nil {
		return cache.Spec{}, err
	}
	if len(m.Tasks) == 0 {
		return cache.Spec{}, fmt.Errorf("model %q has no task in its manifest", id)
	}
	plan := &loadPlan{manifest: m, task: string(m.Tasks[0])}
	spec := cache.Spec{ID: m.ID, Task: plan.task, Data: plan}
	pm := placement.Model{ID: m.ID, Task: plan.task, Size: m.Size()}
	switch m.Format {
	case models.FormatGGUF:
		spec.Backend = "llama"
		if plan.path, err = r.store.FilePath(m, m.GGUF.File); err != nil {
			return cache.Spec{}, err
		}
		plan.contextSize = backends.EffectiveContext(int(m.GGUF.ContextLength), r.cfg.ContextSize)
		f, _ := m.File(m.GGUF.File)
		pm.Format, pm.Path, pm.Digest = placement.GGUF, plan.path, f.Digest
		plan.digest = f.Digest
		if m.GGUF.Projector != "" {
			if plan.projector, err = r.store.FilePath(m, m.GGUF.Projector); err != nil {
				return cache.Spec{}, err
			}
		}
		pm.ContextSize, pm.Slots, pm.BatchSize = plan.contextSize, r.cfg.ChatSlots, llama.DefaultBatchSize
	case models.FormatONNX:
		spec.Backend = "onnx"
		if plan.dir, err = r.store.ModelDir(m); err != nil {
			return cache.Spec{}, err
		}
		lanes, _ := pipelines.LaneSplit(r.cfg.Threads, r.cfg.Lanes, m.Size())
		pm.Format, pm.Lanes = placement.ONNX, lanes > 1 && plan.task != string(models.TaskSummarize)
	default:
		return cache.Spec{}, fmt.Errorf("model %q has unknown format %q", id, m.Format)
	}
	var place placement.Plan
	if pm.Format == placement.GGUF && r.cfg.ContextSize == 0 {
		place, err = r.placeAutoContext(ctx, &pm, int(m.GGUF.ContextLength))
		plan.contextSize = pm.ContextSize
	} else {
		place, err = r.planner.Place(ctx, pm)
	}
	if err != nil {
		return cache.Spec{}, err
	}
	spec.Context = plan.contextSize
	plan.place = place
	plan.useGPU, plan.gpuKind, plan.gpuLayers = place.Kind != "", place.Kind, place.GPULayers
	spec.Device, spec.GPUShare, spec.RAM, spec.VRAM, spec.Estimate = place.Device, place.Share, place.RAM, place.VRAM, place.Estimate
	return spec, nil
}

// load dispatches to the backend's loader.
func (r *runtime) load(ctx context.Context, spec cache.Spec) (cache.Instance, error) {
	plan, ok := spec.Data.(*loadPlan)
	if !ok {
		return nil, errors.New("load: spec without a plan")
	}
	load, ok := r.loaders[spec.Backend]
	if !ok {
		return nil, fmt.Errorf("no %s backend in this build", spec.Backend)
	}
	for _, st := range r.libs.Check() {
		if (spec.Backend == "llama" && st.Name == "llama.cpp") || (spec.Backend == "onnx" && st.Name == "onnxruntime") {
			if !st.Installed {
				return nil, st
			}
		}
	}
	// A blob that changed since it was verified is hashed again; one that
	// does not match its digest is never loaded.
	if err := r.store.VerifyForLoad(ctx, plan.manifest); err != nil {
		return nil, fmt.Errorf("load %s: %w", spec.ID, err)
	}
	return load(ctx, spec, plan)
}

// minAutoContext is the least context --context-size auto gives a chat
// model, whatever its memory estimate: below it agents cannot work.
const minAutoContext = 4096

// placeAutoContext chooses the context of a chat model for --context-size
// auto: its trained context (DefaultContextCap when the file does not say),
// halved while the memory estimate of the model with its slots exceeds the
// RAM budget, down to minAutoContext. It logs the choice and why.
func (r *runtime) placeAutoContext(ctx context.Context, pm *placement.Model, trained int) (placement.Plan, error) {
	budget := r.cacheConfig().RAM
	pm.ContextSize = trained
	if pm.ContextSize <= 0 {
		pm.ContextSize = backends.DefaultContextCap
	}
	for {
		place, err := r.planner.Place(ctx, *pm)
		if err != nil {
			return place, err
		}
		fits := budget <= 0 || place.RAM <= budget
		if fits || pm.ContextSize/2 < minAutoContext {
			why := "the trained context fits the RAM budget"
			switch {
			case !fits:
				why = "the least context auto gives; the model does not fit the RAM budget even so"
			case pm.ContextSize < trained:
				why = "halved from the trained context until the estimate fits the RAM budget"
			case trained <= 0:
				why = "the file gives no trained context"
			}
			r.log.Info("chat context chosen", "model", pm.ID, "context", pm.ContextSize, "trained", trained,
				"slots", pm.Slots, "ram", place.RAM, "ram_budget", budget, "reason", why)
			return place, nil
		}
		pm.ContextSize /= 2
	}
}
