package engine

import (
	"errors"
	"fmt"
	"os"

	gguf "github.com/gpustack/gguf-parser-go"

	"github.com/modeld/modeld/internal/ggufscan"
)

// fileFacts are what the GGUF header says, read in Go before llama.cpp sees
// the file.
type fileFacts struct {
	arch     string
	name     string
	fileType string
	params   uint64
}

// inspectFile checks that path is a complete GGUF file (magic, version,
// metadata, tensor infos, and enough bytes for every tensor) before it is
// handed to llama.cpp, which may abort the process on some corrupt files.
// The bounded scan (internal/ggufscan) runs first: the metadata parser
// recurses into nested arrays, and a stack overflow is fatal, not a panic.
func inspectFile(path string) (facts fileFacts, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return facts, fmt.Errorf("llama: open model: %w", err)
	}
	if st.IsDir() {
		return facts, fmt.Errorf("%w: %s is a directory", ErrInvalidModel, path)
	}
	if _, err := ggufscan.ScanFile(path); err != nil {
		if errors.Is(err, ggufscan.ErrInvalid) {
			return facts, fmt.Errorf("%w: %s: %w", ErrInvalidModel, path, err)
		}
		return facts, fmt.Errorf("llama: open model: %w", err)
	}
	// The parser reads a memory map of the file: through the file itself it
	// makes a read and a seek per string, and a 152k-token vocabulary's
	// tokens and merges took 0.38-0.59 s that way on a 2-CPU machine, 0.02-0.05
	// s mapped (docs/PERFORMANCE.md). Its mapped reads copy what they keep,
	// and a file that shrinks under the map gives a read error, not a fault.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: GGUF parser failed: %v", ErrInvalidModel, path, r)
		}
	}()
	f, err := gguf.ParseGGUFFile(path, gguf.SkipLargeMetadata(), gguf.UseMMap())
	if err != nil {
		return facts, fmt.Errorf("%w: %s: %w", ErrInvalidModel, path, err)
	}
	arch := f.Architecture()
	if arch.Architecture == "" {
		return facts, fmt.Errorf("%w: %s: no general.architecture", ErrInvalidModel, path)
	}
	md := f.Metadata()
	return fileFacts{
		arch:     arch.Architecture,
		name:     md.Name,
		fileType: md.FileType.String(),
		params:   uint64(f.ModelParameters),
	}, nil
}
