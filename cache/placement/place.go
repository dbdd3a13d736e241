package placement

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"

	"github.com/modeld/modeld/probe"
)

// Format is a model's file format.
type Format string

const (
	GGUF Format = "gguf" // llama.cpp, in a runner process; layers can be split
	ONNX Format = "onnx" // ONNX Runtime, in the daemon; CUDA only, never split
)

// Model is what placement needs to know about one model.
type Model struct {
	ID     string
	Task   string // the task the GPU allowlist names (chat, embed, ...)
	Format Format
	Size   int64 // bytes of the model's files

	// GGUF: the model file, its blob digest (the key of the header cache),
	// and the engine's context per slot, slots and batch size.
	Path        string
	Digest      string
	ContextSize int
	Slots       int
	BatchSize   int

	// ONNX: the pipeline keeps a second CPU session (its lanes).
	Lanes bool
}

// Plan is where a model runs and what it holds there.
type Plan struct {
	Device string     // "cpu" or a GPU id such as "cuda:1"
	Kind   probe.Kind // the GPU's kind; "" on the CPU
	GPU    probe.GPU  // the GPU, as the probe saw it; zero on the CPU
	// GPULayers is llama.cpp's n_gpu_layers for a GGUF model: -1 all, 0 none,
	// else that many layers (the output layer counts as one).
	GPULayers int
	Share     float64 // fraction of the layers on the GPU, 0..1
	RAM       int64   // bytes of RAM
	VRAM      int64   // bytes of VRAM on Device
	Estimate  Estimate
	// CPURAM is the RAM the model holds if a GPU load falls back to the CPU.
	CPURAM int64
	// Env points a runner process at Device (and only it).
	Env []string
	// Reason says why this device, with the numbers.
	Reason string
}

// Config is the planner's view of the machine.
type Config struct {
	Info     probe.Info
	GPUTasks []string         // tasks allowed on a GPU
	VRAM     map[string]int64 // VRAM budgets per GPU id, as the cache has them (Budgets)
	// FreeVRAM re-reads a GPU's free memory before each fit (default
	// probe.FreeVRAM); ok false means the device cannot tell.
	FreeVRAM func(probe.GPU) (free uint64, ok bool, err error)
	// Used returns the VRAM the cache has accounted per GPU id (nil: none).
	Used func() map[string]int64
	Log  *slog.Logger
}

// Planner places models. Its methods are safe for concurrent use.
type Planner struct {
	cfg   Config
	files ggufFiles
}

// New returns a planner.
func New(cfg Config) *Planner {
	if cfg.FreeVRAM == nil {
		cfg.FreeVRAM = probe.FreeVRAM
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Planner{cfg: cfg}
}

// gpuRoom is one candidate GPU and the room it has for a model.
type gpuRoom struct {
	gpu probe.GPU
	// now: VRAM free for a new model without unloading any: the budget less
	// what the cache holds there, and no more than the device reports free.
	now int64
	// most: VRAM the model may get after the cache unloads the idle models
	// there: the budget, and no more than free plus what the cache holds.
	most int64
}

func (r gpuRoom) String() string {
	if r.now == math.MaxInt64 {
		return r.gpu.ID() + " (size unknown)"
	}
	return fmt.Sprintf("%s %s free of %s", r.gpu.ID(), mib(r.now), mib(r.most))
}

// rooms lists the GPUs the task may use with their room, in probe order.
func (p *Planner) rooms(task string, onnx bool) []gpuRoom {
	if !slices.Contains(p.cfg.GPUTasks, task) {
		return nil
	}
	var used map[string]int64
	if p.cfg.Used != nil {
		used = p.cfg.Used()
	}
	var out []gpuRoom
	for _, k := range probe.GPUKinds {
		if onnx && k != probe.CUDA {
			continue // the ONNX Runtime build modeld uses knows only the CUDA provider
		}
		if !p.cfg.Info.Backend(k).Usable {
			continue
		}
		for _, g := range p.cfg.Info.Devices(k) {
			r := gpuRoom{gpu: g, now: math.MaxInt64, most: math.MaxInt64}
			held := used[g.ID()]
			if b, ok := p.cfg.VRAM[g.ID()]; ok {
				r.now, r.most = b-held, b
			}
			free, ok, err := p.cfg.FreeVRAM(g)
			if err != nil {
				p.cfg.Log.Warn("reading free GPU memory failed; counting against the budget only", "device", g.ID(), "err", err)
			}
			if ok {
				r.now = min(r.now, int64(free))
				r.most = min(r.most, int64(free)+held)
			}
			out = append(out, r)
		}
	}
	return out
}

// Place decides where m runs and what it holds.
func (p *Planner) Place(_ context.Context, m Model) (Plan, error) {
	var (
		plan Plan
		err  error
	)
	switch m.Format {
	case GGUF:
		plan, err = p.placeGGUF(m)
	case ONNX:
		plan = p.placeONNX(m)
	default:
		return Plan{}, fmt.Errorf("placement: model %q has unknown format %q", m.ID, m.Format)
	}
	if err != nil {
		return Plan{}, fmt.Errorf("placement of %q: %w", m.ID, err)
	}
	attrs := []any{"model", m.ID, "device", plan.Device, "ram", plan.Estimate.RAM}
	if plan.Device != "cpu" {
		attrs = append(attrs, "vram", plan.Estimate.VRAM)
	}
	if m.Format == GGUF {
		attrs = append(attrs, "gpu_layers", plan.GPULayers, "layers", plan.Estimate.Layers,
			"context_cells", plan.Estimate.ContextCells, "slots", plan.Estimate.Slots)
	}
	p.cfg.Log.Info("model placed", append(attrs, "reason", plan.Reason)...)
	return plan, nil
}

func (p *Planner) placeGGUF(m Model) (Plan, error) {
	// The file first: a broken one is refused for what is wrong with it,
	// whatever context its manifest led the caller to ask for.
	gf, err := p.files.get(m.Path, m.Digest)
	if err != nil {
		return Plan{}, err
	}
	if m.Slots < 1 || m.ContextSize < 1 {
		return Plan{}, fmt.Errorf("context %d x %d slots: both must be at least 1", m.ContextSize, m.Slots)
	}
	s, err := newGGUFShape(gf, m.ContextSize, m.Slots, m.BatchSize)
	if err != nil {
		return Plan{}, err
	}
	cpu, err := s.estimate(0, "")
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{Device: "cpu", RAM: cpu.RAM.Total(), Estimate: cpu, CPURAM: cpu.RAM.Total()}
	rooms := p.rooms(m.Task, false)
	if len(rooms) == 0 {
		plan.Reason = p.noGPUReason(m.Task, false)
		return plan, nil
	}

	// The whole model on the GPU with the most room now; else on the one
	// with the most room once its idle models are unloaded.
	full := make([]Estimate, len(rooms))
	for i, r := range rooms {
		if full[i], err = s.estimate(s.layers(), r.gpu.Kind); err != nil {
			return Plan{}, err
		}
	}
	best := -1
	for i, r := range rooms {
		if full[i].VRAM.Total() <= r.now && (best < 0 || r.now > rooms[best].now) {
			best = i
		}
	}
	why := "the whole model fits in the free VRAM"
	if best < 0 {
		for i, r := range rooms {
			if full[i].VRAM.Total() <= r.most && (best < 0 || r.now > rooms[best].now) {
				best = i
			}
		}
		why = "the whole model fits once idle models there are unloaded"
	}
	if best >= 0 {
		r := rooms[best]
		return p.gpuPlan(plan, r.gpu, full[best], -1, fmt.Sprintf("%s: needs %s of VRAM; %s", why, mib(full[best].VRAM.Total()), roomList(rooms))), nil
	}

	// Split: the GPU that holds the most layers (ties: the most room now).
	bestN, bestE := 0, Estimate{}
	for i, r := range rooms {
		n, e, err := s.mostLayers(r.most, r.gpu.Kind)
		if err != nil {
			return Plan{}, err
		}
		if n > bestN || (n == bestN && n > 0 && r.now > rooms[best].now) {
			best, bestN, bestE = i, n, e
		}
	}
	if bestN == 0 {
		plan.Reason = fmt.Sprintf("not one layer fits on a GPU (the whole model needs %s of VRAM; %s); it runs on the CPU",
			mib(full[0].VRAM.Total()), roomList(rooms))
		return plan, nil
	}
	return p.gpuPlan(plan, rooms[best].gpu, bestE, bestN, fmt.Sprintf("split: %d of %d layers fit (%s of VRAM; the whole model needs %s; %s)",
		bestN, s.layers(), mib(bestE.VRAM.Total()), mib(full[best].VRAM.Total()), roomList(rooms))), nil
}

func (p *Planner) gpuPlan(plan Plan, g probe.GPU, e Estimate, layers int, why string) Plan {
	plan.Device, plan.Kind, plan.GPU, plan.Estimate, plan.Reason = g.ID(), g.Kind, g, e, why
	plan.RAM, plan.VRAM = e.RAM.Total(), e.VRAM.Total()
	plan.RAM = unifiedRAM(p.cfg.Info.OS, g, plan.RAM, plan.VRAM)
	plan.GPULayers, plan.Share = layers, 1
	if layers > 0 && e.Layers > 0 {
		plan.Share = float64(layers) / float64(e.Layers)
	}
	plan.Env = deviceEnv(g)
	return plan
}

// deviceEnv is the environment that shows a runner only GPU g, so that
// llama.cpp neither splits a model over other GPUs nor opens them. The other
// kind's devices are hidden too: with both ggml GPU backends installed, one
// NVIDIA GPU is a CUDA and a Vulkan device at once, and llama.cpp would
// split the model over the two.
func deviceEnv(g probe.GPU) []string {
	switch g.Kind {
	case probe.CUDA:
		id := g.UUID
		if id == "" {
			id = strconv.Itoa(g.NativeIndex)
		}
		return []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=" + id, "GGML_VK_VISIBLE_DEVICES="}
	case probe.Vulkan:
		return []string{"GGML_VK_VISIBLE_DEVICES=" + strconv.Itoa(g.NativeIndex), "CUDA_VISIBLE_DEVICES="}
	}
	return nil
}

func (p *Planner) noGPUReason(task string, onnx bool) string {
	if !slices.Contains(p.cfg.GPUTasks, task) {
		return fmt.Sprintf("task %s is not on the GPU allowlist", task)
	}
	if onnx {
		return "no usable CUDA GPU (ONNX Runtime uses CUDA only)"
	}
	return "no usable GPU"
}

func roomList(rooms []gpuRoom) string {
	s := "room:"
	for i, r := range rooms {
		if i > 0 {
			s += ","
		}
		s += " " + r.String()
	}
	return s
}

// ONNX rule of thumb: ONNX Runtime holds the weights once plus arenas of
// about the same size, and a fixed part.
const onnxFixed = 32 << 20

func (p *Planner) placeONNX(m Model) Plan {
	ram := Parts{Weights: m.Size, Compute: m.Size, Overhead: onnxFixed}
	if m.Lanes {
		ram.Weights += m.Size // the lanes' session: a second copy of the weights
	}
	const note = "ONNX rule of thumb: the weights, arenas of the same size and a fixed part"
	plan := Plan{Device: "cpu", RAM: ram.Total(), CPURAM: ram.Total(), Estimate: Estimate{RAM: ram, Note: note}}
	rooms := p.rooms(m.Task, true)
	if len(rooms) == 0 {
		plan.Reason = p.noGPUReason(m.Task, true)
		return plan
	}
	// On the GPU the weights and arenas move there; the host keeps the fixed
	// part. The CUDA context is the daemon's, shared by every session.
	vram := Parts{Weights: m.Size, Compute: m.Size}
	best := -1
	for i, r := range rooms {
		if vram.Total() <= r.now && (best < 0 || r.now > rooms[best].now) {
			best = i
		}
	}
	if best < 0 {
		for i, r := range rooms {
			if vram.Total() <= r.most && (best < 0 || r.now > rooms[best].now) {
				best = i
			}
		}
	}
	if best < 0 {
		plan.Reason = fmt.Sprintf("needs %s of VRAM and cannot be split; %s; it runs on the CPU", mib(vram.Total()), roomList(rooms))
		return plan
	}
	g := rooms[best].gpu
	plan.Device, plan.Kind, plan.GPU, plan.Share = g.ID(), g.Kind, g, 1
	plan.Estimate = Estimate{RAM: Parts{Overhead: onnxFixed}, VRAM: vram, Note: note}
	plan.RAM, plan.VRAM = plan.Estimate.RAM.Total(), vram.Total()
	plan.CPURAM = ram.Total()
	plan.Reason = fmt.Sprintf("needs %s of VRAM; %s", mib(vram.Total()), roomList(rooms))
	return plan
}
