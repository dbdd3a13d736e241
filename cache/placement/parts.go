package placement

import (
	"fmt"
	"log/slog"
)

// Parts are the bytes one memory (RAM or one GPU's VRAM) holds for a model.
type Parts struct {
	Weights  int64 `json:"weights_bytes"`
	KV       int64 `json:"kv_bytes"`
	Compute  int64 `json:"compute_bytes"`  // compute buffers and graph inputs
	Overhead int64 `json:"overhead_bytes"` // fixed costs: metadata, output buffer, process and device contexts
}

// Total is the sum of the parts.
func (p Parts) Total() int64 { return p.Weights + p.KV + p.Compute + p.Overhead }

// LogValue writes the parts in MiB.
func (p Parts) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("total", mib(p.Total())),
		slog.String("weights", mib(p.Weights)),
		slog.String("kv", mib(p.KV)),
		slog.String("compute", mib(p.Compute)),
		slog.String("overhead", mib(p.Overhead)),
	)
}

// Estimate is how a plan's RAM and VRAM were reached.
type Estimate struct {
	RAM  Parts  `json:"ram"`
	VRAM Parts  `json:"vram,omitzero"`
	Note string `json:"note,omitempty"` // how the estimate was made, when it is a rule of thumb
	// GGUF: the KV cache's cells (context per slot, padded, times slots),
	// the slots, and llama.cpp's n_gpu_layers out of Layers.
	ContextCells int `json:"context_cells,omitempty"`
	Slots        int `json:"slots,omitempty"`
	GPULayers    int `json:"gpu_layers,omitempty"`
	Layers       int `json:"layers,omitempty"`
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
