package ggufgen

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// GGUF value type ids (gguf.h).
const (
	typeUint32  uint32 = 4
	typeInt32   uint32 = 5
	typeFloat32 uint32 = 6
	typeBool    uint32 = 7
	typeString  uint32 = 8
	typeArray   uint32 = 9
)

// ggml tensor type ids written in tensor infos.
const (
	ggmlF32 uint32 = 0
	ggmlF16 uint32 = 1
)

// alignment is GGUF's default general.alignment.
const alignment = 32

// kv is one metadata entry; value is one of uint32, int32, float32, bool,
// string, []string, []int32, []float32.
type kv struct {
	key   string
	value any
}

// tensor is one tensor to write: dims innermost first, and a function that
// produces its elements in row-major order (innermost dimension fastest).
type tensor struct {
	name string
	dims []uint64
	typ  uint32
	fill func(dst []float32)
}

func (t *tensor) elements() uint64 {
	n := uint64(1)
	for _, d := range t.dims {
		n *= d
	}
	return n
}

func (t *tensor) size() uint64 {
	if t.typ == ggmlF16 {
		return t.elements() * 2
	}
	return t.elements() * 4
}

func padTo(n uint64) uint64 {
	return (n + alignment - 1) / alignment * alignment
}

// ggufWriter serialises a GGUF v3 file: header, metadata, tensor infos, padding
// and the aligned tensor data.
type ggufWriter struct {
	w   *bufio.Writer
	n   uint64
	err error
}

func (g *ggufWriter) write(p []byte) {
	if g.err != nil {
		return
	}
	var n int
	n, g.err = g.w.Write(p)
	g.n += uint64(n)
}

func (g *ggufWriter) u32(v uint32) { g.write(binary.LittleEndian.AppendUint32(nil, v)) }
func (g *ggufWriter) u64(v uint64) { g.write(binary.LittleEndian.AppendUint64(nil, v)) }

func (g *ggufWriter) str(s string) {
	g.u64(uint64(len(s)))
	g.write([]byte(s))
}

func (g *ggufWriter) pad() {
	if rem := padTo(g.n) - g.n; rem > 0 {
		g.write(make([]byte, rem))
	}
}

func (g *ggufWriter) value(v any) error {
	switch x := v.(type) {
	case uint32:
		g.u32(typeUint32)
		g.u32(x)
	case int32:
		g.u32(typeInt32)
		g.u32(uint32(x))
	case float32:
		g.u32(typeFloat32)
		g.u32(math.Float32bits(x))
	case bool:
		g.u32(typeBool)
		if x {
			g.write([]byte{1})
		} else {
			g.write([]byte{0})
		}
	case string:
		g.u32(typeString)
		g.str(x)
	case []string:
		g.u32(typeArray)
		g.u32(typeString)
		g.u64(uint64(len(x)))
		for _, s := range x {
			g.str(s)
		}
	case []int32:
		g.u32(typeArray)
		g.u32(typeInt32)
		g.u64(uint64(len(x)))
		buf := make([]byte, 0, 4*len(x))
		for _, e := range x {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(e))
		}
		g.write(buf)
	case []float32:
		g.u32(typeArray)
		g.u32(typeFloat32)
		g.u64(uint64(len(x)))
		buf := make([]byte, 0, 4*len(x))
		for _, e := range x {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(e))
		}
		g.write(buf)
	default:
		return fmt.Errorf("ggufgen: unsupported metadata value type %T", v)
	}
	return nil
}

// writeGGUF writes a complete GGUF file to w.
func writeGGUF(w io.Writer, kvs []kv, tensors []*tensor) error {
	g := &ggufWriter{w: bufio.NewWriterSize(w, 1<<20)}
	g.write([]byte("GGUF"))
	g.u32(3)
	g.u64(uint64(len(tensors)))
	g.u64(uint64(len(kvs)))
	for _, e := range kvs {
		g.str(e.key)
		if err := g.value(e.value); err != nil {
			return err
		}
	}
	var off uint64
	for _, t := range tensors {
		g.str(t.name)
		g.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			g.u64(d)
		}
		g.u32(t.typ)
		g.u64(off)
		off = padTo(off + t.size())
	}
	g.pad()
	for _, t := range tensors {
		g.tensorData(t)
		g.pad()
	}
	if g.err != nil {
		return fmt.Errorf("ggufgen: write: %w", g.err)
	}
	if err := g.w.Flush(); err != nil {
		return fmt.Errorf("ggufgen: write: %w", err)
	}
	return nil
}

// tensorData writes t's elements, encoding one row (innermost dimension) at a
// time.
func (g *ggufWriter) tensorData(t *tensor) {
	vals := make([]float32, t.elements())
	t.fill(vals)
	row := int(t.dims[0])
	buf := make([]byte, 0, 4*row)
	for i := 0; i < len(vals); i += row {
		buf = buf[:0]
		for _, v := range vals[i : i+row] {
			if t.typ == ggmlF16 {
				buf = binary.LittleEndian.AppendUint16(buf, float16(v))
			} else {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			}
		}
		g.write(buf)
	}
}
