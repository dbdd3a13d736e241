package ggufgen

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// Seed bounds: what Reduce keeps of a real file, so that a fuzz seed made of
// it stays a few KiB and each of its executions fast.
const (
	seedMaxArray  = 64      // elements kept of each array
	seedMaxString = 4 << 10 // bytes kept of each string (a chat template is cut)
	seedMaxKV     = 1 << 12 // keys read before the file is called too large
)

// Reduce reads the GGUF metadata of r (a real model or vocabulary file) and
// returns a GGUF (version 3, which v2 files are laid out as) with the same keys, types and value order, every array cut
// to its first 64 elements (the vocabulary arrays stay the same length as
// each other) and every string to 4 KiB, and no tensors: a fuzz seed that
// carries a real file's shape of metadata.
func Reduce(r io.Reader) ([]byte, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var hdr [24]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, fmt.Errorf("ggufgen: read header: %w", err)
	}
	if v := binary.LittleEndian.Uint32(hdr[4:]); string(hdr[:4]) != "GGUF" || (v != 2 && v != 3) {
		return nil, fmt.Errorf("ggufgen: not a little-endian GGUF v2 or v3 file")
	}
	n := binary.LittleEndian.Uint64(hdr[16:])
	if n > seedMaxKV {
		return nil, fmt.Errorf("ggufgen: %d metadata keys", n)
	}
	out := new(Raw).Header(0, n)
	rd := &seedReader{br: br}
	for range n {
		key := rd.str(1 << 16)
		out.Str(key)
		vt := rd.u32()
		out.U32(vt)
		if vt != typeArray {
			rd.value(out, vt)
			continue
		}
		et, cnt := rd.u32(), rd.u64()
		keep := min(cnt, seedMaxArray)
		out.U32(et).U64(keep)
		for i := range cnt {
			if i < keep {
				rd.value(out, et)
			} else {
				rd.value(nil, et)
			}
			if rd.err != nil {
				break
			}
		}
		if rd.err != nil {
			return nil, rd.err
		}
	}
	if rd.err != nil {
		return nil, rd.err
	}
	return out.Bytes(), nil
}

type seedReader struct {
	br  *bufio.Reader
	err error
	buf [8]byte
}

func (r *seedReader) read(n int) []byte {
	if r.err != nil {
		return make([]byte, n)
	}
	if _, err := io.ReadFull(r.br, r.buf[:n]); err != nil {
		r.err = fmt.Errorf("ggufgen: read: %w", err)
	}
	return r.buf[:n]
}

func (r *seedReader) u32() uint32 { return binary.LittleEndian.Uint32(r.read(4)) }
func (r *seedReader) u64() uint64 { return binary.LittleEndian.Uint64(r.read(8)) }

func (r *seedReader) str(limit uint64) string {
	n := r.u64()
	if r.err == nil && n > limit {
		r.err = fmt.Errorf("ggufgen: a string of %d bytes", n)
	}
	if r.err != nil {
		return ""
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.br, b); err != nil {
		r.err = fmt.Errorf("ggufgen: read string: %w", err)
	}
	return string(b)
}

// value copies one scalar or string of type t to out (nil: skip it).
func (r *seedReader) value(out *Raw, t uint32) {
	var size int
	switch t {
	case 0, 1, 7: // uint8, int8, bool
		size = 1
	case 2, 3: // uint16, int16
		size = 2
	case 4, 5, 6: // uint32, int32, float32
		size = 4
	case 10, 11, 12: // uint64, int64, float64
		size = 8
	case typeString:
		s := r.str(64 << 20)
		if out != nil {
			out.Str(s[:min(len(s), seedMaxString)])
		}
		return
	default:
		if r.err == nil {
			r.err = fmt.Errorf("ggufgen: value type %d in a seed", t)
		}
		return
	}
	b := r.read(size)
	if out != nil {
		out.Raw(b)
	}
}

// Seeds returns fuzz seeds for GGUF readers from the llama.cpp test assets in
// dir (internal/testenv.LlamaAssets): the metadata of every vocabulary file
// vocab/ggml-vocab-*.gguf (Reduce), and for every chat template
// templates/*.jinja a ValidTiny with that template (its first 4 KiB) as its
// tokenizer.chat_template. It fails when either set is empty.
func Seeds(dir string) ([][]byte, error) {
	vocabs, err := filepath.Glob(filepath.Join(dir, "vocab", "ggml-vocab-*.gguf"))
	if err != nil {
		return nil, err
	}
	templates, err := filepath.Glob(filepath.Join(dir, "templates", "*.jinja"))
	if err != nil {
		return nil, err
	}
	if len(vocabs) == 0 || len(templates) == 0 {
		return nil, fmt.Errorf("ggufgen: %d vocabularies and %d templates in %s", len(vocabs), len(templates), dir)
	}
	sort.Strings(vocabs)
	sort.Strings(templates)
	var seeds [][]byte
	for _, p := range vocabs {
		b, err := reduceFile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(p), err)
		}
		seeds = append(seeds, b)
	}
	for _, p := range templates {
		tmpl, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		// Cut like Reduce's strings: a GGUF reader skips the template's
		// bytes, and a large seed makes the fuzzer spend its time minimizing.
		seeds = append(seeds, WithTemplate(string(tmpl[:min(len(tmpl), seedMaxString)])))
	}
	return seeds, nil
}

func reduceFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	return Reduce(f)
}

// WithTemplate returns ValidTiny with tmpl as its tokenizer.chat_template.
func WithTemplate(tmpl string) []byte {
	return withKVs(1, func(r *Raw) { r.KVString("tokenizer.chat_template", tmpl) })
}
