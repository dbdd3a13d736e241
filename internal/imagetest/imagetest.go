// Package imagetest writes image files for tests that the standard library
// cannot encode: WebP (a RIFF container and lossless VP8L frames). It is
// test support only; nothing outside _test.go files imports it.
package imagetest

import (
	"encoding/binary"
	"image/color"
)

// RIFF wraps chunks in a RIFF WEBP container.
func RIFF(chunks ...[]byte) []byte {
	var body []byte
	for _, c := range chunks {
		body = append(body, c...)
	}
	out := []byte("RIFF\x00\x00\x00\x00WEBP")
	binary.LittleEndian.PutUint32(out[4:], uint32(4+len(body)))
	return append(out, body...)
}

// WebPChunk is one chunk of a WebP file (padded to an even length).
func WebPChunk(typ string, data []byte) []byte {
	out := append([]byte(typ), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(out[4:], uint32(len(data)))
	out = append(out, data...)
	if len(data)%2 == 1 {
		out = append(out, 0)
	}
	return out
}

// bitWriter packs bits least-significant first, as VP8L reads them.
type bitWriter struct {
	out  []byte
	acc  uint64
	nacc uint
}

func (b *bitWriter) put(v uint64, n uint) {
	b.acc |= v << b.nacc
	b.nacc += n
	for b.nacc >= 8 {
		b.out = append(b.out, byte(b.acc))
		b.acc >>= 8
		b.nacc -= 8
	}
}

func (b *bitWriter) bytes() []byte {
	if b.nacc > 0 {
		b.out = append(b.out, byte(b.acc))
	}
	return b.out
}

// VP8L writes a lossless WebP frame of w×h pixels whose colour is c0 or c1
// (they differ in green only) by pick(x, y): no transforms, no colour cache,
// one group of "simple" prefix codes, so each pixel is one bit.
func VP8L(w, h int, c0, c1 color.NRGBA, pick func(x, y int) bool) []byte {
	var bw bitWriter
	bw.put(0x2f, 8)
	bw.put(uint64(w-1), 14)
	bw.put(uint64(h-1), 14)
	bw.put(1, 1) // alpha used
	bw.put(0, 3) // version
	bw.put(0, 1) // no transform
	bw.put(0, 1) // no colour cache
	bw.put(0, 1) // no meta prefix codes
	simple := func(syms ...byte) {
		bw.put(1, 1)
		bw.put(uint64(len(syms)-1), 1)
		bw.put(1, 1) // 8-bit first symbol
		for _, s := range syms {
			bw.put(uint64(s), 8)
		}
	}
	g0, g1 := c0.G, c1.G
	if g0 > g1 {
		panic("vp8l: c0 must have the smaller green")
	}
	if g0 == g1 {
		simple(g0)
	} else {
		simple(g0, g1)
	}
	simple(c0.R)
	simple(c0.B)
	simple(c0.A)
	simple(0) // distance
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			if g0 != g1 {
				v := uint64(0)
				if pick(x, y) {
					v = 1
				}
				bw.put(v, 1)
			}
		}
	}
	return WebPChunk("VP8L", bw.bytes())
}

// WebP is a lossless w×h WebP file whose pixels are c0 or c1 (which differ
// in green only, c0's the smaller) by pick(x, y).
func WebP(w, h int, c0, c1 color.NRGBA, pick func(x, y int) bool) []byte {
	return RIFF(VP8L(w, h, c0, c1, pick))
}
