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
// It does not interpret the metadata (architecture, hyperparameters,
// tokenizer): that stays with the GGUF metadata parser the callers run after a
// successful scan, and with llama.cpp.
package ggufscan
