// Package placement decides where a model runs and what it costs: which
// device (the CPU or one GPU, the best fit over every usable GPU its task
// may use), how many of a GGUF model's layers go to that GPU, and the bytes
// of RAM and VRAM the model holds for its real context size and slot count,
// with the parts (weights, KV cache, compute buffers, fixed overheads)
// kept apart so logs and the cache's snapshot can show them. GGUF costs come
// from gguf-parser-go's llama.cpp estimate, which knows grouped-query
// attention, sliding windows and recurrent state. Placement also computes
// the memory budgets the cache enforces (Budgets).
//
// It reads the model file's header (after the bounded scan of internal/ggufscan:
// a file that fails it is an *InvalidModelError) and the GPUs' free memory (through an
// injected function), and nothing else. It must not load a model, start a
// process, call native code, or keep the budget itself: the cache holds the
// loaded set and its accounting, and placement only reads what the cache
// has accounted per GPU (Config.Used) to see the room that is left.
package placement
