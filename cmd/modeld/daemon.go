package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/pipelines"
	"github.com/modeld/modeld/probe"
)

// runtime joins the store, the probe and the backends into the cache's Resolver
// and Loader: which backend serves a model, on which device, with how much memory.
type runtime struct {
	cfg     Config
	log     *slog.Logger
	store   *models.Store
	info    probe.Info
	libs    backends.Libs
	loaders map[string]func(ctx context.Context, spec cache.Spec, plan *loadPlan) (cache.Instance, error)
}

// loadPlan is what the Resolver found out and the Loader needs (cache.Spec.Data).
type loadPlan struct {
	manifest *models.Manifest
	task     string
	useGPU   bool // the task is on the allowlist and a usable GPU backend exists
	gpuKind  probe.Kind
	// gpuLayers is the number of GGUF layers to offload: -1 all of them.
	gpuLayers int
	// GGUF: the model file and the context per sequence.
	path        string
	contextSize int
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
	cc.RAM = r.cfg.RAMBudget
	if cc.RAM == 0 {
		cc.RAM = int64(float64(r.info.Memory.TotalBytes) * 0.8)
	}
	for _, g := range r.info.GPUs {
		if !r.info.Backend(g.Kind).Usable || g.TotalBytes == 0 {
			continue
		}
		if cc.VRAM == nil {
			cc.VRAM = map[string]int64{}
		}
		budget := r.cfg.VRAMBudget
		if budget == 0 {
			budget = int64(float64(g.TotalBytes) * 0.9)
		}
		cc.VRAM[g.ID()] = budget
	}
	return cc
}

// gpuFor returns the GPU a task may use: the first usable GPU backend's first
// device, when the task is on the allowlist.
func (r *runtime) gpuFor(task string, onnx bool) (probe.GPU, bool) {
	if !slices.Contains(r.cfg.GPUTasks, task) {
		return probe.GPU{}, false
	}
	for _, k := range probe.GPUKinds {
		if onnx && k != probe.CUDA {
			continue // the ONNX Runtime build modeld uses knows only the CUDA provider
		}
		if !r.info.Backend(k).Usable {
			continue
		}
		if devs := r.info.Devices(k); len(devs) > 0 {
			return devs[0], true
		}
	}
	return probe.GPU{}, false
}

// resolve turns a model id into a load plan and its memory estimate.
func (r *runtime) resolve(_ context.Context, id string) (cache.Spec, error) {
	m, err := r.store.Get(id)
	if err != nil {
		return cache.Spec{}, err
	}
	if len(m.Tasks) == 0 {
		return cache.Spec{}, fmt.Errorf("model %q has no task in its manifest", id)
	}
	plan := &loadPlan{manifest: m, task: string(m.Tasks[0])}
	spec := cache.Spec{ID: m.ID, Task: plan.task, Device: "cpu", Data: plan}
	switch m.Format {
	case models.FormatGGUF:
		spec.Backend = "llama"
		if plan.path, err = r.store.FilePath(m, m.GGUF.File); err != nil {
			return cache.Spec{}, err
		}
		plan.contextSize = r.cfg.ContextSize
		if trained := int(m.GGUF.ContextLength); trained > 0 && trained < plan.contextSize {
			plan.contextSize = trained
		}
		need := m.Size() + kvBytes(m.GGUF, plan.contextSize*r.cfg.ChatSlots) + 64<<20
		spec.RAM = need
		if g, ok := r.gpuFor(plan.task, false); ok {
			r.placeLayers(&spec, plan, g, need)
		}
	case models.FormatONNX:
		spec.Backend = "onnx"
		if plan.dir, err = r.store.ModelDir(m); err != nil {
			return cache.Spec{}, err
		}
		// ONNX Runtime holds the weights once plus arenas of about the same size.
		spec.RAM = 2*m.Size() + 32<<20
		if g, ok := r.gpuFor(plan.task, true); ok {
			plan.useGPU, plan.gpuKind = true, g.Kind
			spec.Device, spec.GPUShare = g.ID(), 1
		} else if lanes, _ := pipelines.LaneSplit(r.cfg.Threads, r.cfg.Lanes, m.Size()); lanes > 1 && plan.task != string(models.TaskSummarize) {
			spec.RAM += m.Size() // the lanes' session: a second copy of the weights
		}
	default:
		return cache.Spec{}, fmt.Errorf("model %q has unknown format %q", id, m.Format)
	}
	return spec, nil
}

// placeLayers offloads as many of a GGUF model's layers to GPU g as its VRAM
// budget holds: all of them when the whole estimate fits, else the share that
// fits, the rest staying in RAM.
func (r *runtime) placeLayers(spec *cache.Spec, plan *loadPlan, g probe.GPU, need int64) {
	budget := r.cacheConfig().VRAM[g.ID()]
	blocks := int(plan.manifest.GGUF.BlockCount)
	const hostOverhead = 128 << 20 // what stays in RAM with every layer offloaded
	switch {
	case budget <= 0 || need <= budget:
		plan.gpuLayers, spec.GPUShare = -1, 1
		spec.VRAM, spec.RAM = need, hostOverhead
	case blocks > 0:
		layers := int(float64(blocks) * float64(budget) / float64(need))
		if layers < 1 {
			r.log.Info("model too large for any GPU layer; it runs on the CPU", "model", spec.ID, "needs", need, "vram_budget", budget)
			return
		}
		plan.gpuLayers = layers
		spec.GPUShare = float64(layers) / float64(blocks)
		spec.VRAM = int64(spec.GPUShare * float64(need))
		spec.RAM = need - spec.VRAM + hostOverhead
	default:
		return
	}
	plan.useGPU, plan.gpuKind, spec.Device = true, g.Kind, g.ID()
	r.log.Info("GPU offload planned", "model", spec.ID, "device", spec.Device, "layers", plan.gpuLayers, "of", blocks, "share", spec.GPUShare)
}

// kvBytes estimates the f16 KV cache of a llama-style model for ctx tokens.
func kvBytes(g *models.GGUFInfo, ctx int) int64 {
	if g == nil || g.BlockCount == 0 || g.EmbeddingLength == 0 {
		return 0
	}
	return 2 * 2 * int64(g.BlockCount) * int64(ctx) * int64(g.EmbeddingLength)
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
