// Package ggufscan checks the structure of a GGUF file against fixed bounds
// before any other parser sees it. It owns the pre-scan only: magic and
// version, the key-value metadata (key and string lengths, value types, array
// lengths and nesting, the metadata size), the tensor infos (name lengths,
// dimension counts, element-count and byte-size overflow, known tensor types,
// block alignment of rows, offsets and sizes against the data section) and
// the alignment of the data section.
//
// The scan is iterative (nested arrays use an explicit, bounded stack), reads
// through a small buffer, skips what it does not need to look at (string
// bodies, numeric arrays, tensor data) and allocates nothing in proportion to
// a count the file declares: a hostile file costs a bounded amount of memory
// and stack and ends with an *Error naming the byte offset and what is wrong.
//
// It reads, of the metadata's meaning, only the counts that a parser or
// llama.cpp allocates by (hparams.go): block counts (at most 512, llama.cpp's
// own limit; a block count of 2^32-1 made the metadata parser exhaust the
// daemon's memory), heads, head sizes, embedding, feed-forward and context
// lengths, expert counts, per-layer arrays, and the vocabulary arrays'
// types, lengths and string sizes, checked against each other once the
// whole metadata is read. Everything else (architecture, templates, the
// tokenizer's behaviour) stays with the GGUF metadata parser the callers run
// after a successful scan, and with llama.cpp.
package ggufscan
