package placement

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"

	gguf "github.com/gpustack/gguf-parser-go"

	"github.com/modeld/modeld/internal/ggufscan"
	"github.com/modeld/modeld/probe"
)

// RunnerOverhead is the RAM of a runner process besides the model: the Go
// runtime and the llama.cpp libraries.
const RunnerOverhead = 64 << 20

// DeviceOverhead is the VRAM a runner process holds on its GPU before any
// model buffer: the driver's context, and for CUDA the cuBLAS workspace. The
// CUDA figure is the one Ollama reserves per runner (457 MiB); Vulkan's
// context is smaller; Metal shares system memory.
func DeviceOverhead(k probe.Kind) int64 {
	switch k {
	case probe.CUDA:
		return 457 << 20
	case probe.Vulkan:
		return 256 << 20
	}
	return 0
}

// KVCells is the number of KV cache cells the llama engine allocates for
// slots sequences of ctx tokens each: llama.cpp pads the context to a
// multiple of 256 and splits it evenly between the sequences, so the engine
// pads each sequence's share (backends/llama, newScheduler).
func KVCells(ctx, slots int) int { return (ctx + 255) / 256 * 256 * slots }

// BatchTokens is the engine's batch for slots sequences and a batch size.
func BatchTokens(batch, slots int) int { return max(batch, slots, 32) }

// InvalidModelError is a model file that fails the bounded header scan
// (internal/ggufscan): a store written by an older modeld, or a file changed
// on disk, holds a model that cannot be placed or loaded. It names the bound
// that failed; the api answers it with 422 and the code invalid_model.
type InvalidModelError struct {
	Path string
	Err  error // the scan's *ggufscan.Error
}

func (e *InvalidModelError) Error() string {
	return fmt.Sprintf("the model file %s is not a valid GGUF file: %v; remove the model (modeld rm) and import or pull it again", e.Path, e.Err)
}

func (e *InvalidModelError) Unwrap() error { return e.Err }

// HTTPStatus is 422: the model exists but cannot be used.
func (e *InvalidModelError) HTTPStatus() int { return http.StatusUnprocessableEntity }

// ErrorCode is the error object's code.
func (e *InvalidModelError) ErrorCode() string { return "invalid_model" }

// ggufFiles caches parsed GGUF headers, and scan refusals, by blob digest (a
// blob never changes).
type ggufFiles struct {
	mu    sync.Mutex
	files map[string]ggufEntry
}

type ggufEntry struct {
	gf  *gguf.GGUFFile
	err error // the scan's refusal
}

// maxCachedFiles bounds the header cache; a header is tens of KB once its
// long strings are dropped (a file may have up to 65,536 tensor infos, about
// 11 MiB, in the worst case).
const maxCachedFiles = 16

// maxKeptString is the longest metadata string a cached header keeps: the
// estimate reads numbers and short names, never a chat template or a
// description, which may be megabytes.
const maxKeptString = 1 << 10

func (c *ggufFiles) get(path, digest string) (gf *gguf.GGUFFile, err error) {
	c.mu.Lock()
	e, ok := c.files[digest]
	c.mu.Unlock()
	if ok && digest != "" {
		return e.gf, e.err
	}
	gf, err = parseGGUF(path)
	var bad *InvalidModelError
	if digest != "" && (err == nil || errors.As(err, &bad)) {
		c.mu.Lock()
		if c.files == nil || len(c.files) >= maxCachedFiles {
			c.files = map[string]ggufEntry{}
		}
		c.files[digest] = ggufEntry{gf: gf, err: err}
		c.mu.Unlock()
	}
	return gf, err
}

// parseGGUF runs the bounded header scan and then the metadata parser. The
// scan comes first whatever the store checked at import: a store written by
// an older modeld may hold a file whose counts (a block count of 2^32-1) make
// the parser allocate until the process dies, and an out-of-memory is fatal,
// not a panic.
func parseGGUF(path string) (gf *gguf.GGUFFile, err error) {
	if _, err := ggufscan.ScanFile(path); err != nil {
		if errors.Is(err, ggufscan.ErrInvalid) {
			return nil, &InvalidModelError{Path: path, Err: err}
		}
		return nil, fmt.Errorf("read GGUF metadata of %s: %w", path, err)
	}
	// The parser panics on some malformed values; that is a bad file, not a
	// crash.
	defer func() {
		if r := recover(); r != nil {
			gf, err = nil, fmt.Errorf("read GGUF metadata of %s: malformed file: %v", path, r)
		}
	}()
	// Mapped: through the file itself the parser makes a read and a seek
	// per string it skips, 0.3-0.4 s for a 152k-token vocabulary on a
	// 2-CPU machine against 0.01-0.02 s mapped (BenchmarkParseGGUF). Its
	// mapped reads copy what they keep, and a file that shrinks under the
	// map gives a read error, not a fault.
	gf, err = gguf.ParseGGUFFile(path, gguf.SkipLargeMetadata(), gguf.UseMMap())
	if err != nil {
		return nil, fmt.Errorf("read GGUF metadata of %s: %w", path, err)
	}
	for i, kv := range gf.Header.MetadataKV {
		if v, ok := kv.Value.(string); ok && len(v) > maxKeptString {
			gf.Header.MetadataKV[i].Value = ""
		}
	}
	return gf, nil
}

// ggufShape is what one GGUF model costs at every offload depth.
type ggufShape struct {
	gf     *gguf.GGUFFile
	blocks int // transformer blocks; llama.cpp's layers are blocks + 1 (output)
	cells  int
	slots  int
	batch  int
}

func newGGUFShape(gf *gguf.GGUFFile, ctx, slots, batch int) (s ggufShape, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("GGUF architecture: malformed metadata: %v", r)
		}
	}()
	a := gf.Architecture()
	if a.Type != "" && a.Type != "model" {
		return s, fmt.Errorf("GGUF file is a %s, not a model", a.Type)
	}
	// The scan bounded the block count; the cap keeps the shape bounded
	// even for a parser that derived it from the tensors instead.
	blocks := int(min(a.BlockCount, ggufscan.DefaultMaxBlockCount))
	return ggufShape{gf: gf, blocks: blocks, cells: KVCells(ctx, slots), slots: slots, batch: BatchTokens(batch, slots)}, nil
}

// layers is llama.cpp's layer count: the blocks and the output layer.
func (s ggufShape) layers() int { return s.blocks + 1 }

// estimate returns the RAM and VRAM parts with n of the layers on a GPU of
// kind k (n = 0: CPU only; n = layers(): everything). llama.cpp offloads the
// output layer first, then blocks from the last one down.
func (s ggufShape) estimate(n int, k probe.Kind) (e Estimate, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("GGUF estimate: malformed metadata: %v", r)
		}
	}()
	n = max(0, min(n, s.layers()))
	r := s.gf.EstimateLLaMACppRun(
		gguf.WithLLaMACppContextSize(int32(min(s.cells, math.MaxInt32))),
		gguf.WithParallelSize(int32(s.slots)),
		gguf.WithLLaMACppLogicalBatchSize(int32(s.batch)),
		gguf.WithLLaMACppPhysicalBatchSize(int32(s.batch)),
		gguf.WithLLaMACppOffloadLayers(uint64(n)),
	)
	if len(r.Devices) < 2 {
		return e, fmt.Errorf("GGUF estimate: no device usage")
	}
	host, dev := r.Devices[0], r.Devices[1]
	hostWeights := host.Weight.Input + host.Weight.Compute + host.Weight.ComputeOverridden
	if !dev.HandleOutputLayer || n == 0 {
		hostWeights += host.Weight.Output
	}
	e = Estimate{
		RAM: Parts{
			Weights:  int64(hostWeights),
			KV:       int64(host.KVCache.Sum()),
			Compute:  int64(host.Computation.Sum()),
			Overhead: int64(host.Footprint) + RunnerOverhead,
		},
		ContextCells: int(r.ContextSize),
		Slots:        s.slots,
		GPULayers:    n,
		Layers:       s.layers(),
	}
	if n > 0 {
		e.VRAM = Parts{
			Weights:  int64(dev.Weight.Sum()),
			KV:       int64(dev.KVCache.Sum()),
			Compute:  int64(dev.Computation.Sum()),
			Overhead: int64(dev.Footprint) + DeviceOverhead(k),
		}
	}
	return e, nil
}

// mostLayers returns the most layers whose VRAM fits in room on a GPU of
// kind k, with their estimate; 0 when not even one does. VRAM grows with the
// layers, so a binary search finds it.
func (s ggufShape) mostLayers(room int64, k probe.Kind) (int, Estimate, error) {
	lo, hi := 0, s.layers() // lo fits (0 always does), hi+1 does not
	var best Estimate
	for lo < hi {
		mid := (lo + hi + 1) / 2
		e, err := s.estimate(mid, k)
		if err != nil {
			return 0, Estimate{}, err
		}
		if e.VRAM.Total() <= room {
			lo, best = mid, e
		} else {
			hi = mid - 1
		}
	}
	return lo, best, nil
}
