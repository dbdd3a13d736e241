package llama

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/wire"
	"github.com/modeld/modeld/probe"
)

// Name is the llama backend's name in the registry.
const Name = "llama"

func init() { backends.Register(Name, load) }

// LoadOptions are the llama backend's own settings, passed as
// backends.LoadSpec.Options.
type LoadOptions struct {
	LogLevel     slog.Level    // the runner's log level
	StallTimeout time.Duration // see RunnerOptions.StallTimeout
	// CrashDir receives the crash reports of the model's runners (see
	// RunnerOptions.CrashDir; "" keeps none).
	CrashDir string
	// CPUVariant is the libggml-cpu-<variant> ggml keeps on this CPU, as the
	// probe read it (probe.Library.CPUVariant): runners load it alone
	// ("": ggml opens every variant to choose, as it does when that fails).
	CPUVariant string
	// Command overrides the runner program (tests); nil runs this executable.
	Command []string
	// Lookup is the most tokens a decode step drafts by prompt lookup
	// (Options.Lookup: 0 off unless a request asks).
	Lookup int
	// ReuseAnswers evaluates idle slots' last answers again so that the
	// next turn reuses them (Options.ReuseAnswers).
	ReuseAnswers bool
	// PromptCache keeps the KV of long prompt prefixes on disk (zero: off).
	PromptCache PromptCache
	// Projector is the model's multimodal projector file (the store's
	// mmproj beside the model; "" for a text-only model): the runner loads
	// it with llama.cpp's multimodal library when that is installed, and
	// the model then reads images in chat messages (Info.Vision).
	Projector string
}

// PromptCache is where and how much of the KV of prompt prefixes that
// slots drop is kept on disk (package promptcache), and the model file's
// sha256 that keys it. The cache is off unless all three are set.
type PromptCache struct {
	Dir         string
	MaxBytes    int64
	ModelSHA256 string // hex
}

// Loaded is a GGUF model in its runner process, as the backends contract
// sees it: a backends.Model that generates and tokenizes. Details and the
// Runner's other methods give what only this backend knows.
type Loaded struct {
	*Runner
	device      string // the GPU it was loaded onto (LoadSpec.Device), "" for the CPU
	Constraints        // its output follows llama.cpp's grammars
}

var (
	_ backends.Model         = (*Loaded)(nil)
	_ backends.Generator     = (*Loaded)(nil)
	_ backends.Tokenizer     = (*Loaded)(nil)
	_ backends.ChatTokenizer = (*Loaded)(nil)
	_ backends.TextGenerator = (*Loaded)(nil)
	_ backends.Infiller      = (*Loaded)(nil)
	_ backends.Constrainer   = (*Loaded)(nil)
)

// InfillPromptContext is the fill-in-the-middle prompt of prefix and suffix
// in the vocabulary's own FIM tokens, in prefix-suffix-middle order, after
// the BOS token where the model adds one.
func (l *Loaded) InfillPromptContext(ctx context.Context, prefix, suffix string) ([]int32, error) {
	i := l.Runner.Info()
	if len(i.FIM) != 3 {
		return nil, backends.ErrNoInfill
	}
	pre, err := l.TokenizeContext(ctx, prefix, false, false)
	if err != nil {
		return nil, err
	}
	suf, err := l.TokenizeContext(ctx, suffix, false, false)
	if err != nil {
		return nil, err
	}
	ids := make([]int32, 0, len(pre)+len(suf)+4)
	if i.AddBOS {
		ids = append(ids, i.BOS)
	}
	ids = append(append(append(ids, i.FIM[0]), pre...), i.FIM[1])
	return append(append(ids, suf...), i.FIM[2]), nil
}

// Info is the model's description in the backends contract's terms.
func (l *Loaded) Info() backends.Info { return contract(l.Runner.Info(), l.device) }

// Details is the engine's own description of the model.
func (l *Loaded) Details() Info { return l.Runner.Info() }

// contract describes the model, loaded onto the GPU named gpu ("" for
// none), in the backends contract's terms: it runs there when layers were
// offloaded and the load did not fall back to the CPU.
func contract(i Info, gpu string) backends.Info {
	dev := probe.DeviceCPU
	if gpu != "" && i.GPULayers != 0 && i.GPUFallback == "" {
		dev = gpu
	}
	return backends.Info{
		Backend: Name, Path: i.Path, Arch: i.Arch, Task: "chat",
		ContextSize: i.ContextSize, Slots: i.Slots, Device: dev,
		GPUFallback: i.GPUFallback, ChatTemplate: i.HasChatTemplate(), Vision: i.Vision,
	}
}

// load starts a runner process for spec.Path.
func load(ctx context.Context, spec backends.LoadSpec) (backends.Model, error) {
	var lo LoadOptions
	switch o := spec.Options.(type) {
	case nil:
	case LoadOptions:
		lo = o
	case *LoadOptions:
		lo = *o
	default:
		return nil, fmt.Errorf("llama: load options of type %T; want llama.LoadOptions", spec.Options)
	}
	opts := Options{
		ContextSize:  spec.ContextSize,
		ContextCap:   spec.ContextCap,
		Slots:        spec.Slots,
		Threads:      spec.Threads,
		BatchThreads: spec.BatchThreads,
		MaxWaiting:   spec.QueueLimit,
		Lookup:       lo.Lookup,
		ReuseAnswers: lo.ReuseAnswers,
		Projector:    lo.Projector,
	}
	var grace time.Duration // the default
	if pc := lo.PromptCache; pc.Dir != "" && pc.ModelSHA256 != "" {
		opts.PromptCacheDir, opts.PromptCacheMax, opts.ModelSHA256 = pc.Dir, pc.MaxBytes, pc.ModelSHA256
		grace = wire.PromptCacheStopGrace // it saves its prompts as it stops
	}
	env := cpuOnlyEnv() // a GPU load gets the placement's instead
	device := ""
	if spec.UseGPU {
		if !probe.ValidDevice(spec.Device) || spec.Device == probe.DeviceCPU {
			return nil, fmt.Errorf("llama: a GPU load names its device as cuda:N, vulkan:N or metal:0, not %q", spec.Device)
		}
		opts.GPULayers = spec.GPULayers
		env, device = spec.Env, spec.Device
	}
	log := spec.Logger
	if log == nil {
		log = slog.Default()
	}
	r, err := StartRunner(ctx, RunnerOptions{
		Env:          env,
		ModelPath:    spec.Path,
		LibRoot:      spec.LibRoot,
		CPUVariant:   lo.CPUVariant,
		Options:      opts,
		Command:      lo.Command,
		Logger:       log,
		LogLevel:     lo.LogLevel,
		StallTimeout: lo.StallTimeout,
		Name:         spec.ID,
		CrashDir:     lo.CrashDir,
		StopGrace:    grace,
	})
	if err != nil {
		return nil, err
	}
	return &Loaded{Runner: r, device: device}, nil
}
