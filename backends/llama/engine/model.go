package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
)

// DefaultThreads is the thread count for single-token decode steps (one
// stream generating) when Options.Threads is 0, and DefaultBatchThreads the
// count for steps carrying several tokens (prompt chunks, or several streams
// at once) when Options.BatchThreads is 0. llama.cpp picks between the two
// per llama_decode call by the batch's token count.
//
// Measured with scripts/bench-llama-direct on the 35 MB F16 benchmark model
// on a 2-CPU machine shared with other work (median of 7 interleaved runs;
// tok/s): one-token decode through the library directly 614 on one thread
// against 15 on two (a second ggml thread spins at every operation's
// barrier and collapses as soon as another process takes a core; separate
// runs gave 627/453, 509/438, 550/476); the default pair 1/2 gave prompt
// processing 2560, decode 736, engine one stream 693 and four streams 1125
// aggregate, against 1509, 614, 604 and 876 for 1/1. On machines with more
// CPUs, where nothing was measured, both follow llama.cpp's own default: one
// thread per performance core.
func DefaultThreads() int {
	return defaultThreads(runtime.NumCPU(), int(yz.Threads()))
}

// DefaultBatchThreads: see DefaultThreads.
func DefaultBatchThreads() int {
	return defaultBatchThreads(runtime.NumCPU(), int(yz.Threads()))
}

func defaultThreads(numCPU, perfCores int) int {
	if numCPU <= 2 {
		return 1
	}
	return max(1, perfCores)
}

func defaultBatchThreads(numCPU, perfCores int) int {
	if numCPU <= 2 {
		return max(1, numCPU)
	}
	return max(1, perfCores)
}

// withDefaults fills o's zero fields with the defaults.
func withDefaults(o Options) Options {
	if o.ContextCap == 0 {
		o.ContextCap = DefaultContextCap
	}
	if o.Slots == 0 {
		o.Slots = DefaultSlots
	}
	if o.Threads == 0 {
		o.Threads = DefaultThreads()
	}
	if o.BatchThreads == 0 {
		o.BatchThreads = DefaultBatchThreads()
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	return o
}

func validateOptions(o Options) error {
	var errs []error
	if o.ContextSize < 0 {
		errs = append(errs, fmt.Errorf("context size %d is negative", o.ContextSize))
	}
	if o.ContextCap < 0 {
		errs = append(errs, fmt.Errorf("context cap %d is negative", o.ContextCap))
	}
	if o.Slots < 1 || o.Slots > 256 {
		errs = append(errs, fmt.Errorf("slots %d is outside 1..256", o.Slots))
	}
	if o.Threads < 1 {
		errs = append(errs, fmt.Errorf("threads %d is below 1", o.Threads))
	}
	if o.BatchThreads < 1 {
		errs = append(errs, fmt.Errorf("batch threads %d is below 1", o.BatchThreads))
	}
	if o.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("batch size %d is below 1", o.BatchSize))
	}
	if o.GPULayers < -1 {
		errs = append(errs, fmt.Errorf("GPU layers %d is below -1", o.GPULayers))
	}
	if o.MaxWaiting < 0 {
		errs = append(errs, fmt.Errorf("max waiting %d is negative", o.MaxWaiting))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("llama: invalid options: %w", err)
	}
	return nil
}

// Model is a loaded GGUF model with its llama context and scheduler.
// Its methods are safe for concurrent use.
type Model struct {
	info   Info
	model  yz.Model
	vocab  yz.Vocab
	nVocab int

	// life guards the native model against use after Close: every call
	// into the vocabulary holds it for reading, Close for writing.
	life  sync.RWMutex
	freed bool

	tmpl templateState
	sch  *scheduler
	// vis reads images (vision.go); nil for a text-only model.
	vis *vision
}

// Open loads the GGUF model at path. Init must have succeeded. The file is
// checked in Go first: a truncated or garbage file gives an error wrapping
// ErrInvalidModel.
func Open(path string, opts Options) (*Model, error) {
	return open(path, opts, Hooks{})
}

// OpenWithHooks is Open with test seams: a runner process started by a test
// uses them to pause or slow its decode loop.
func OpenWithHooks(path string, opts Options, h Hooks) (*Model, error) {
	return open(path, opts, h)
}

func open(path string, opts Options, h Hooks) (*Model, error) {
	if !initialized() {
		return nil, ErrNotInitialized
	}
	opts = withDefaults(opts)
	if err := validateOptions(opts); err != nil {
		return nil, err
	}
	start := time.Now()
	facts, err := inspectFile(path)
	if err != nil {
		return nil, err
	}
	checkMs := time.Since(start).Milliseconds()
	start = time.Now()
	ym, gpuLayers, fallback, err := loadModel(path, opts.GPULayers)
	if err != nil {
		return nil, err
	}
	modelMs := time.Since(start).Milliseconds()
	m := &Model{model: ym, vocab: yz.ModelGetVocab(ym)}
	m.nVocab = int(yz.VocabNTokens(m.vocab))
	trained := int(yz.ModelNCtxTrain(ym))
	ctxSize := opts.ContextSize
	if ctxSize == 0 {
		ctxSize = backends.EffectiveContext(trained, opts.ContextCap)
	}
	tmpl := yz.ModelChatTemplate(ym, "")
	m.info = Info{
		Path: path, Arch: facts.arch, Name: facts.name, Description: yz.ModelDesc(ym),
		FileType: fileTypeName(ym, facts.fileType), Params: yz.ModelNParams(ym), SizeBytes: yz.ModelSize(ym),
		TrainedContext: trained, ContextSize: ctxSize, Slots: opts.Slots,
		BatchSize: opts.BatchSize, Threads: opts.Threads, BatchThreads: opts.BatchThreads, VocabSize: m.nVocab,
		VocabType: vocabTypeName(yz.GetVocabType(m.vocab)), AddBOS: yz.VocabGetAddBOS(m.vocab),
		BOS: int32(yz.VocabBOS(m.vocab)), EOS: int32(yz.VocabEOS(m.vocab)),
		ChatTemplate: tmpl, GPULayers: gpuLayers, GPUFallback: fallback, FIM: fimTokens(m.vocab),
	}
	if err := m.openProjector(opts, gpuLayers != 0); err != nil {
		_ = yz.ModelFree(ym)
		return nil, err
	}
	start = time.Now()
	sch, err := newScheduler(m, opts, h)
	if err != nil {
		if m.vis != nil {
			m.vis.close()
		}
		_ = yz.ModelFree(ym)
		return nil, err
	}
	m.sch = sch
	go sch.loop()
	slog.Info("llama: model loaded", "path", path, "arch", facts.arch, "ctx", ctxSize,
		"slots", opts.Slots, "threads", opts.Threads, "batch_threads", opts.BatchThreads, "gpu_layers", gpuLayers,
		"vision", m.info.Vision, "check_ms", checkMs, "model_ms", modelMs, "context_ms", time.Since(start).Milliseconds())
	return m, nil
}

// openProjector loads opts.Projector, when set, into m.vis. Without the
// multimodal library the model loads text-only and Info.VisionOff says why;
// a projector the library refuses (another model's, a broken file) fails
// the load.
func (m *Model) openProjector(opts Options, gpu bool) error {
	if opts.Projector == "" {
		return nil
	}
	if err := native.mtmd; err != nil {
		m.info.VisionOff = "the multimodal library is not installed with modeld's runtime libraries"
		slog.Warn("llama: the model's projector is not loaded: it reads text only", "projector", opts.Projector, "err", err)
		return nil
	}
	vis, err := openVision(opts.Projector, m.model, opts.BatchThreads, gpu)
	if err != nil {
		return err
	}
	m.vis, m.info.Vision = vis, true
	return nil
}

// fimTokens is the vocabulary's fill-in-the-middle tokens (prefix, suffix,
// middle), as llama.cpp reads them from the metadata or finds them by their
// spellings; nil when any is missing.
func fimTokens(v yz.Vocab) []int32 {
	fim := []int32{int32(yz.VocabFIMPre(v)), int32(yz.VocabFIMSuf(v)), int32(yz.VocabFIMMid(v))}
	for _, t := range fim {
		if t == int32(yz.TokenNull) {
			return nil
		}
	}
	return fim
}

// loadModel loads the weights, on the GPU when asked and possible, else on
// the CPU; fallback says why a GPU load was given up.
func loadModel(path string, gpuLayers int) (yz.Model, int, string, error) {
	if gpuLayers != 0 && HasGPU() {
		p := yz.ModelDefaultParams()
		p.NGpuLayers = int32(gpuLayers)
		if gpuLayers < 0 {
			p.NGpuLayers = 999
		}
		ym, err := yz.ModelLoadFromFile(path, p)
		if err == nil {
			return ym, gpuLayers, "", nil
		}
		reason := fmt.Sprintf("loading %d layers on the GPU failed (%v); using the CPU", gpuLayers, err)
		slog.Warn("llama: " + reason)
		cpu, _, _, cerr := loadModel(path, 0)
		return cpu, 0, reason, cerr
	}
	fallback := ""
	if gpuLayers != 0 {
		fallback = "no GPU backend device is loaded; using the CPU"
	}
	p := yz.ModelDefaultParams()
	p.SetCPUOnly()
	ym, err := yz.ModelLoadFromFile(path, p)
	if err != nil {
		return 0, 0, fallback, fmt.Errorf("%w: llama.cpp could not load %s: %w", ErrInvalidModel, path, err)
	}
	return ym, 0, fallback, nil
}

// fileTypeName is llama.cpp's name of the model's file type ("F16",
// "Q4_K - Medium"), else the GGUF parser's.
func fileTypeName(ym yz.Model, parsed string) string {
	if name := yz.FtypeName(yz.ModelFtype(ym)); name != "" && name != "unknown" {
		return name
	}
	return parsed
}

func vocabTypeName(t yz.VocabType) string {
	switch t {
	case yz.VocabTypeSPM:
		return "spm"
	case yz.VocabTypeBPE:
		return "bpe"
	case yz.VocabTypeWPM:
		return "wpm"
	case yz.VocabTypeUGM:
		return "ugm"
	case yz.VocabTypeRWKV:
		return "rwkv"
	case yz.VocabTypePLAMO2:
		return "plamo2"
	}
	return "none"
}

// Info describes the model.
func (m *Model) Info() Info { return m.info }

// Stats reports the scheduler's state.
func (m *Model) Stats() Stats { return m.sch.stats() }

// Close stops the scheduler (running and waiting requests end with
// ErrClosed) and frees the context and the model. It is safe to call twice.
func (m *Model) Close() error {
	m.sch.stop()
	if m.vis != nil {
		m.vis.close()
	}
	m.life.Lock()
	defer m.life.Unlock()
	if m.freed {
		return nil
	}
	m.freed = true
	return yz.ModelFree(m.model)
}
