package imagein

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"testing"

	"github.com/modeld/modeld/internal/imagetest"
)

// The test files are made here, from the attacker's side: valid images from
// the standard encoders, hostile ones by writing the containers by hand.

func pattern(w, h int) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			m.SetNRGBA(x, y, color.NRGBA{uint8(x * 37), uint8(y * 91), uint8((x + y) * 13), uint8(255 - x)})
		}
	}
	return m
}

func encPNG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encJPEG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pngChunk is one chunk with its length and CRC.
func pngChunk(typ string, data []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, uint32(len(data)))
	b.WriteString(typ)
	b.Write(data)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	return b.Bytes()
}

// pngHeaderOnly is a PNG whose IHDR claims w×h, with a tiny IDAT and IEND.
func pngHeaderOnly(w, h uint32) []byte {
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr, w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 6 // 8-bit RGBA
	out := append([]byte{}, magicPNG...)
	out = append(out, pngChunk("IHDR", ihdr)...)
	out = append(out, pngChunk("IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})...)
	return append(out, pngChunk("IEND", nil)...)
}

// pngInsert puts chunk right after IHDR of a valid PNG.
func pngInsert(valid, chunk []byte) []byte {
	cut := len(magicPNG) + 12 + 13
	out := append([]byte{}, valid[:cut]...)
	out = append(out, chunk...)
	return append(out, valid[cut:]...)
}

// jpegInsert puts segments right after SOI of a valid JPEG.
func jpegInsert(valid []byte, segs ...[]byte) []byte {
	out := append([]byte{}, valid[:2]...)
	for _, s := range segs {
		out = append(out, s...)
	}
	return append(out, valid[2:]...)
}

func jpegSegment(marker byte, payload []byte) []byte {
	out := []byte{0xFF, marker, 0, 0}
	binary.BigEndian.PutUint16(out[2:], uint16(len(payload)+2))
	return append(out, payload...)
}

// jpegCMYK is SOI, a baseline frame of four components, and a scan header: the
// shape of an Adobe CMYK file up to its first scan.
func jpegCMYK(w, h uint16) []byte {
	sof := []byte{8, byte(h >> 8), byte(h), byte(w >> 8), byte(w), 4}
	for c := byte(1); c <= 4; c++ {
		sof = append(sof, c, 0x11, 0)
	}
	out := []byte{0xFF, 0xD8}
	out = append(out, jpegSegment(0xEE, []byte("Adobe\x00\x64\x00\x00\x00\x00\x02"))...)
	out = append(out, jpegSegment(0xC0, sof)...)
	out = append(out, jpegSegment(0xDA, []byte{4, 1, 0, 2, 0, 3, 0, 4, 0, 0, 63, 0})...)
	return append(out, 0x00, 0xFF, 0xD9)
}

// The WebP container and lossless frames come from internal/imagetest.
var (
	riff      = imagetest.RIFF
	webpChunk = imagetest.WebPChunk
	vp8l      = imagetest.VP8L
)

func vp8x(flags byte, w, h int) []byte {
	d := make([]byte, 10)
	d[0] = flags
	d[4], d[5], d[6] = byte(w-1), byte((w-1)>>8), byte((w-1)>>16)
	d[7], d[8], d[9] = byte(h-1), byte((h-1)>>8), byte((h-1)>>16)
	return webpChunk("VP8X", d)
}

// vp8Header is a lossy frame header claiming w×h, with no image data.
func vp8Header(w, h, pad int) []byte {
	d := []byte{0x50, 0x01, 0x00, 0x9d, 0x01, 0x2a, 0, 0, 0, 0}
	binary.LittleEndian.PutUint16(d[6:], uint16(w))
	binary.LittleEndian.PutUint16(d[8:], uint16(h))
	return webpChunk("VP8 ", append(d, make([]byte, pad)...))
}
