package models

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
)

// Quantizer writes dst, a copy of the GGUF model src quantized to typ,
// calling progress with the tensors done and their total. It runs the
// native quantizer (in a child process: the store holds no native code).
// On error the store removes dst.
type Quantizer func(ctx context.Context, src, dst, typ string, progress func(done, total int)) error

// StatusQuantizing is the status of the progress events of a quantization
// (File names the file made; Total is the input's size and Completed the
// part of it quantized, counted by tensors).
const StatusQuantizing = "quantizing"

// quantizeIn makes the quantized copy of the GGUF file at src in a partial
// file of the store and commits it as a blob: only a quantization that
// finished, and whose output parses as a GGUF file, is renamed into the
// store; a failure or a cancel leaves nothing behind. name is the source
// file's name; the stored file is named after the quantization.
func (s *Store) quantizeIn(ctx context.Context, src, name string, opts ImportOptions, em *Emitter, pins *pinSet) (File, *GGUFInfo, error) {
	if opts.Quantizer == nil {
		return File{}, nil, errors.New("quantize: no quantizer configured")
	}
	typ := strings.ToUpper(opts.Quantize)
	out := quantizedName(name, typ)
	pname := "quantize-" + randomSuffix()
	unlock, err := s.lockPartial(ctx, pname, nil)
	if err != nil {
		return File{}, nil, err
	}
	defer func() {
		unlock()
		s.removeLockFile(pname)
	}()
	ppath := s.partialPath(pname)
	committed := false
	defer func() {
		if !committed {
			_ = os.Remove(ppath)
		}
	}()
	fi, err := os.Stat(src)
	if err != nil {
		return File{}, nil, fmt.Errorf("quantize %s: %w", name, err)
	}
	// Progress counts the input's bytes, in proportion to the tensors done.
	status := StatusQuantizing + " " + name + " to " + typ
	em.Emit(Progress{Status: status})
	err = opts.Quantizer(ctx, src, ppath, typ, func(done, total int) {
		em.Emit(Progress{Status: status, File: out, Total: fi.Size(), Completed: fi.Size() * int64(done) / int64(total)})
	})
	if err != nil {
		return File{}, nil, fmt.Errorf("quantize %s to %s: %w", name, typ, err)
	}
	if err := ctx.Err(); err != nil {
		return File{}, nil, err
	}
	info, err := readGGUF(ppath, out)
	if err != nil {
		return File{}, nil, fmt.Errorf("quantize %s to %s: the output is not a valid model: %w", name, typ, err)
	}
	em.Emit(Progress{Status: StatusVerifying, File: out})
	h, size, err := hashFile(ctx, ppath)
	if err != nil {
		return File{}, nil, err
	}
	pins.add(s.pin(h))
	if err := s.commitBlob(ppath, h); err != nil {
		return File{}, nil, err
	}
	committed = true
	return File{Path: out, Digest: DigestPrefix + h, Size: size}, info, nil
}

// quantizedName is the name of the quantized copy of the GGUF file name:
// its quantization token replaced by typ ("m-F16.gguf" -> "m-Q4_K_M.gguf"),
// or typ appended.
func quantizedName(name, typ string) string {
	ext := path.Ext(name)
	base := strings.TrimSuffix(name, ext)
	if q := quantOfFilename(name); q != "" && strings.HasSuffix(strings.ToUpper(base), q) {
		base = base[:len(base)-len(q)]
		base = strings.TrimRight(base, "-.")
	}
	return base + "-" + typ + ".gguf"
}

// quantizableInput refuses a model whose weights are quantized already:
// llama.cpp quantizes from F32, F16 or BF16 (requantizing loses quality
// twice, and its quantizer refuses it).
func quantizableInput(info *GGUFInfo) error {
	switch strings.ToUpper(info.FileType) {
	case "", "F32", "F16", "BF16":
		return nil
	}
	return fmt.Errorf("%w: %s is %s already; --quantize needs an F32, F16 or BF16 model", ErrInvalidModel, info.File, info.FileType)
}
