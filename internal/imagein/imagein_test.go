package imagein

import (
	"bytes"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"runtime"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends"
)

func TestDecodeValid(t *testing.T) {
	src := pattern(7, 5)
	opaque := image.NewRGBA(src.Bounds())
	for i := range opaque.Pix {
		opaque.Pix[i] = src.Pix[i]
		if i%4 == 3 {
			opaque.Pix[i] = 255
		}
	}
	lim := DefaultLimits()

	// 8-bit RGBA PNG: the straight colour survives, alpha is dropped.
	img, err := Decode(encPNG(t, src), lim)
	if err != nil {
		t.Fatal(err)
	}
	if img.Format != PNG || img.Width != 7 || img.Height != 5 || len(img.RGB) != 7*5*3 {
		t.Fatalf("got %s %d×%d with %d bytes", img.Format, img.Width, img.Height, len(img.RGB))
	}
	for y := 0; y < 5; y++ {
		for x := 0; x < 7; x++ {
			c := src.NRGBAAt(x, y)
			got := img.RGB[(y*7+x)*3:][:3]
			if got[0] != c.R || got[1] != c.G || got[2] != c.B {
				t.Fatalf("pixel %d,%d = %v, want %v", x, y, got, c)
			}
		}
	}

	// 16-bit PNG (RGBA64 opaque, NRGBA64, Gray16): converted to the high byte.
	m16 := image.NewNRGBA64(image.Rect(0, 0, 3, 2))
	m16.SetNRGBA64(1, 1, color.NRGBA64{0xABCD, 0x1234, 0xFFFF, 0x8000})
	img, err = Decode(encPNG(t, m16), lim)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.RGB[(1*3+1)*3:][:3]; !bytes.Equal(got, []byte{0xAB, 0x12, 0xFF}) {
		t.Fatalf("16-bit pixel = %x, want ab12ff", got)
	}
	g16 := image.NewGray16(image.Rect(0, 0, 2, 2))
	g16.SetGray16(0, 1, color.Gray16{0x7F01})
	img, err = Decode(encPNG(t, g16), lim)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.RGB[6:9]; !bytes.Equal(got, []byte{0x7F, 0x7F, 0x7F}) {
		t.Fatalf("gray16 pixel = %x", got)
	}

	// Paletted with transparency.
	pal := image.NewPaletted(image.Rect(0, 0, 2, 1), color.Palette{color.NRGBA{10, 20, 30, 0}, color.NRGBA{200, 100, 50, 128}})
	pal.Pix[1] = 1
	img, err = Decode(encPNG(t, pal), lim)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(img.RGB, []byte{10, 20, 30, 200, 100, 50}) {
		t.Fatalf("paletted = %v", img.RGB)
	}

	// JPEG: colour within the codec's error.
	img, err = Decode(encJPEG(t, opaque), lim)
	if err != nil {
		t.Fatal(err)
	}
	if img.Format != JPEG || img.Width != 7 || img.Height != 5 {
		t.Fatalf("jpeg: %s %d×%d", img.Format, img.Width, img.Height)
	}
	gray := image.NewGray(image.Rect(0, 0, 8, 8))
	for i := range gray.Pix {
		gray.Pix[i] = 128
	}
	img, err = Decode(encJPEG(t, gray), lim)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range img.RGB {
		if v < 126 || v > 130 {
			t.Fatalf("gray jpeg sample %d, want about 128", v)
		}
	}

	// Lossless WebP.
	c0, c1 := color.NRGBA{9, 40, 70, 255}, color.NRGBA{9, 200, 70, 255}
	chk := func(x, y int) bool { return (x+y)%2 == 1 }
	img, err = Decode(riff(vp8l(5, 3, c0, c1, chk)), lim)
	if err != nil {
		t.Fatal(err)
	}
	if img.Format != WebP || img.Width != 5 || img.Height != 3 {
		t.Fatalf("webp: %s %d×%d", img.Format, img.Width, img.Height)
	}
	for y := 0; y < 3; y++ {
		for x := 0; x < 5; x++ {
			want := c0
			if chk(x, y) {
				want = c1
			}
			if got := img.RGB[(y*5+x)*3:][:3]; !bytes.Equal(got, []byte{want.R, want.G, want.B}) {
				t.Fatalf("webp pixel %d,%d = %v, want %v", x, y, got, want)
			}
		}
	}
	// With a VP8X canvas that agrees.
	if _, err := Decode(riff(vp8x(0x10, 5, 3), vp8l(5, 3, c0, c1, chk)), lim); err != nil {
		t.Fatal(err)
	}
}

// TestOnePixel: a 1×1 image is valid and accepted in every format.
func TestOnePixel(t *testing.T) {
	lim := DefaultLimits()
	for name, data := range map[string][]byte{
		"png":  encPNG(t, pattern(1, 1)),
		"jpeg": encJPEG(t, image.NewGray(image.Rect(0, 0, 1, 1))),
		"webp": riff(vp8l(1, 1, color.NRGBA{1, 2, 3, 255}, color.NRGBA{1, 2, 3, 255}, nil)),
	} {
		img, err := Decode(data, lim)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if img.Width != 1 || img.Height != 1 || len(img.RGB) != 3 {
			t.Fatalf("%s: %d×%d, %d bytes", name, img.Width, img.Height, len(img.RGB))
		}
	}
}

// hostile is every refused file, with the reason it must be refused for.
func hostile(t testing.TB) map[string]struct {
	data []byte
	code string
	want string
} {
	valid := encPNG(t, pattern(6, 6))
	validJPEG := encJPEG(t, pattern(6, 6))
	var gifBuf bytes.Buffer
	anim := &gif.GIF{Image: []*image.Paletted{
		image.NewPaletted(image.Rect(0, 0, 2, 2), color.Palette{color.Black, color.White}),
		image.NewPaletted(image.Rect(0, 0, 2, 2), color.Palette{color.Black, color.White}),
	}, Delay: []int{1, 1}}
	if err := gif.EncodeAll(&gifBuf, anim); err != nil {
		t.Fatal(err)
	}
	exif := jpegSegment(0xE1, append([]byte("Exif\x00\x00"), make([]byte, 65000)...))
	var manyExif [][]byte
	for i := 0; i < 20; i++ {
		manyExif = append(manyExif, exif)
	}
	green := color.NRGBA{0, 10, 0, 255}
	return map[string]struct {
		data []byte
		code string
		want string
	}{
		"png 65535x65535 header":          {pngHeaderOnly(65535, 65535), CodeTooLarge, "65535×65535"},
		"png 2^31 header":                 {pngHeaderOnly(1<<31-1, 1<<31-1), CodeTooLarge, "over every limit"},
		"png 0xN":                         {pngHeaderOnly(0, 10), CodeCorrupt, "at least one pixel"},
		"png Nx0":                         {pngHeaderOnly(10, 0), CodeCorrupt, "at least one pixel"},
		"png truncated":                   {valid[:len(valid)/2], CodeCorrupt, "truncated or corrupt"},
		"png no IEND":                     {valid[:len(valid)-12], CodeCorrupt, "truncated or corrupt"},
		"png bad crc":                     {append(append([]byte{}, valid[:len(valid)-20]...), append([]byte{0xde, 0xad}, valid[len(valid)-18:]...)...), CodeCorrupt, "truncated or corrupt"},
		"png header says 1x1, data empty": {pngHeaderOnly(1, 1), CodeCorrupt, "truncated or corrupt"},
		"apng":                            {pngInsert(valid, pngChunk("acTL", []byte{0, 0, 0, 2, 0, 0, 0, 0})), CodeAnimated, "animated PNG"},
		"png huge text":                   {pngInsert(valid, pngChunk("tEXt", append([]byte("Comment\x00"), make([]byte, 2<<20)...))), CodeTooLarge, "metadata"},
		"png huge exif":                   {pngInsert(valid, pngChunk("eXIf", make([]byte, 3<<20))), CodeTooLarge, "metadata"},
		"wrong magic":                     {[]byte("\x89PNX\r\n\x1a\nhello world, not an image"), CodeUnsupported, "not a PNG, JPEG or WebP"},
		"text":                            {[]byte("<svg xmlns='http://www.w3.org/2000/svg'/>"), CodeUnsupported, "not a PNG, JPEG or WebP"},
		"one byte":                        {[]byte{0x89}, CodeUnsupported, "not a PNG"},
		"empty":                           {nil, CodeCorrupt, "empty"},
		"gif animated":                    {gifBuf.Bytes(), CodeUnsupported, "GIF"},
		"avif":                            {[]byte("\x00\x00\x00\x1cftypavif\x00\x00\x00\x00avifmif1miaf"), CodeUnsupported, "AVIF"},
		"heic":                            {[]byte("\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic"), CodeUnsupported, "HEIF"},
		"bmp":                             {[]byte("BM\x3a\x00\x00\x00\x00\x00\x00\x00\x36\x00"), CodeUnsupported, "BMP"},
		"tiff":                            {[]byte("II*\x00\x08\x00\x00\x00"), CodeUnsupported, "TIFF"},
		"jpeg cmyk":                       {jpegCMYK(4, 4), CodeUnsupported, "CMYK"},
		"jpeg truncated":                  {validJPEG[:len(validJPEG)/2], CodeCorrupt, "truncated or corrupt"},
		"jpeg header only":                {validJPEG[:20], CodeCorrupt, "truncated or corrupt"},
		"jpeg huge exif":                  {jpegInsert(validJPEG, manyExif...), CodeTooLarge, "metadata"},
		"jpeg lossless":                   {jpegInsert([]byte{0xFF, 0xD8}, jpegSegment(0xC3, []byte{8, 0, 4, 0, 4, 1, 1, 0x11, 0})), CodeUnsupported, "lossless"},
		"jpeg 0 height":                   {jpegInsert([]byte{0xFF, 0xD8}, jpegSegment(0xC0, []byte{8, 0, 0, 0, 4, 1, 1, 0x11, 0}), jpegSegment(0xDA, []byte{1, 1, 0, 0, 63, 0})), CodeCorrupt, "at least one pixel"},
		"jpeg 65535x65535":                {jpegInsert([]byte{0xFF, 0xD8}, jpegSegment(0xC0, []byte{8, 0xFF, 0xFF, 0xFF, 0xFF, 1, 1, 0x11, 0}), jpegSegment(0xDA, []byte{1, 1, 0, 0, 63, 0})), CodeTooLarge, "65535×65535"},
		"webp animated":                   {riff(vp8x(0x02, 4, 4), webpChunk("ANIM", make([]byte, 6)), webpChunk("ANMF", make([]byte, 16))), CodeAnimated, "animated WebP"},
		"webp ANMF only":                  {riff(webpChunk("ANMF", make([]byte, 16))), CodeAnimated, "animated WebP"},
		"webp canvas lies":                {riff(vp8x(0, 1, 1), vp8l(16000, 16000, green, green, nil)), CodeCorrupt, "truncated or corrupt"},
		"webp 16000x16000":                {riff(vp8l(16000, 16000, green, green, nil)), CodeTooLarge, "16000×16000"},
		"webp canvas mismatch":            {riff(vp8x(0, 2, 2), vp8l(3, 3, green, green, nil)), CodeCorrupt, "truncated or corrupt"},
		"webp lossy 16383":                {riff(vp8Header(16383, 16383, 16)), CodeTooLarge, "16383×16383"},
		"webp lossy data":                 {riff(vp8Header(8, 8, 0)), CodeCorrupt, "truncated or corrupt"},
		"webp truncated":                  {riff(vp8l(4, 4, green, green, nil))[:20], CodeCorrupt, "truncated or corrupt"},
		"webp two frames":                 {riff(vp8l(2, 2, green, green, nil), vp8l(2, 2, green, green, nil)), CodeCorrupt, "truncated or corrupt"},
		"webp huge exif":                  {riff(vp8x(0x08, 2, 2), vp8l(2, 2, green, green, nil), webpChunk("EXIF", make([]byte, 2<<20))), CodeTooLarge, "metadata"},
		"webp no frame":                   {riff(), CodeCorrupt, "truncated or corrupt"},
	}
}

func TestDecodeHostile(t *testing.T) {
	lim := DefaultLimits()
	for name, c := range hostile(t) {
		t.Run(name, func(t *testing.T) {
			img, err := Decode(c.data, lim)
			if err == nil {
				t.Fatalf("decoded a %d×%d image, want an error", img.Width, img.Height)
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != c.code {
				t.Fatalf("error %v (code %q), want code %q", err, codeOf(err), c.code)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
			checkOwnWords(t, err)
			if !errors.Is(err, backends.ErrInvalidRequest) || e.HTTPStatus() != 400 {
				t.Errorf("error %v is not a 400 invalid request", err)
			}
		})
	}
}

func codeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// checkOwnWords fails when an error text quotes a decoder or an address.
func checkOwnWords(t testing.TB, err error) {
	t.Helper()
	s := err.Error()
	for _, bad := range []string{"png:", "jpeg:", "webp:", "gif:", "EOF", "0x", "runtime", "invalid format", "FormatError", "unsupported JPEG"} {
		if strings.Contains(s, bad) {
			t.Errorf("error %q quotes %q", s, bad)
		}
	}
}

// TestHugeHeaderAllocatesNothing: a 65535×65535 (16 GiB of RGBA) header is
// refused before anything in proportion to it is allocated.
func TestHugeHeaderAllocatesNothing(t *testing.T) {
	data := pngHeaderOnly(65535, 65535)
	lim := DefaultLimits()
	lim.MaxPixels = 1 << 40 // only the side bound stops it: prove the side check is before decode
	lim.MaxSide = 1 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Decode(data, DefaultLimits())
	runtime.ReadMemStats(&after)
	if codeOf(err) != CodeTooLarge {
		t.Fatalf("got %v, want too large", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Fatalf("refusing the header allocated %d bytes", n)
	}
	// The same file with the limits raised reaches the decoder, which fails on
	// the missing data: still an error of modeld's words.
	_, err = Decode(pngHeaderOnly(3000, 3000), lim)
	if codeOf(err) != CodeCorrupt {
		t.Fatalf("got %v, want corrupt", err)
	}
}

func TestLimits(t *testing.T) {
	if err := DefaultLimits().Check(); err != nil {
		t.Fatal(err)
	}
	bad := DefaultLimits()
	bad.MaxImages, bad.MaxPixels = 0, -1
	if err := bad.Check(); err == nil || !strings.Contains(err.Error(), "max images") || !strings.Contains(err.Error(), "max pixels") {
		t.Fatalf("Check of zero limits: %v", err)
	}
	data := encPNG(t, pattern(40, 30))
	lim := DefaultLimits()
	lim.MaxPixels = 40*30 - 1
	if _, err := Decode(data, lim); codeOf(err) != CodeTooLarge {
		t.Fatalf("pixels: %v", err)
	}
	lim = DefaultLimits()
	lim.MaxSide = 39
	if _, err := Decode(data, lim); codeOf(err) != CodeTooLarge {
		t.Fatalf("side: %v", err)
	}
	lim = DefaultLimits()
	lim.MaxBytes = int64(len(data) - 1)
	if _, err := Decode(data, lim); codeOf(err) != CodeTooLarge {
		t.Fatalf("bytes: %v", err)
	}
}

func TestBatch(t *testing.T) {
	data := encPNG(t, pattern(4, 4))
	lim := DefaultLimits()
	lim.MaxImages = 2
	b := NewBatch(lim)
	for i := 0; i < 2; i++ {
		if _, err := b.Decode(data); err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.Decode(data)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeTooMany || e.Index != 2 || !strings.HasPrefix(err.Error(), "image 2: ") {
		t.Fatalf("third image: %v", err)
	}

	lim = DefaultLimits()
	lim.MaxRequestBytes = int64(len(data)*2 - 1)
	b = NewBatch(lim)
	b.Decode(data)
	if _, err := b.Decode(data); codeOf(err) != CodeTooLarge {
		t.Fatalf("request bytes: %v", err)
	}
	lim = DefaultLimits()
	lim.MaxRequestPixels = 16*3 - 1
	b = NewBatch(lim)
	b.Decode(data)
	b.Decode(data)
	if _, err := b.Decode(data); codeOf(err) != CodeTooLarge || b.Count() != 2 {
		t.Fatalf("request pixels: %v after %d", err, b.Count())
	}
	// A refused image says its index and leaves the count alone.
	b = NewBatch(DefaultLimits())
	b.Decode(data)
	_, err = b.Decode([]byte("nope"))
	if !errors.As(err, &e) || e.Index != 1 || b.Count() != 1 {
		t.Fatalf("bad second image: %v (count %d)", err, b.Count())
	}
}

func TestBase64AndDataURL(t *testing.T) {
	data := encPNG(t, pattern(3, 3))
	enc := base64.StdEncoding.EncodeToString(data)
	for name, s := range map[string]string{
		"padded":              enc,
		"raw":                 strings.TrimRight(enc, "="),
		"wrapped":             enc[:10] + "\n" + enc[10:20] + "\r\n " + enc[20:],
		"data url":            "data:image/png;base64," + enc,
		"data url lying type": "DATA:image/jpeg;base64," + enc,
	} {
		b := NewBatch(DefaultLimits())
		var img *Image
		var err error
		if IsDataURL(s) {
			img, err = b.DecodeDataURL(s)
		} else {
			img, err = b.DecodeBase64(s)
		}
		if err != nil || img.Format != PNG || img.Width != 3 {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for name, c := range map[string]struct{ s, code string }{
		"not base64":      {"!!!not base64!!!", CodeEncoding},
		"http url":        {"https://example.com/cat.png", CodeEncoding},
		"no comma":        {"data:image/png;base64", CodeEncoding},
		"not base64 url":  {"data:image/png," + enc, CodeEncoding},
		"file url":        {"file:///etc/passwd", CodeEncoding},
		"decodes to junk": {"data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("GIF89a......")), CodeUnsupported},
	} {
		b := NewBatch(DefaultLimits())
		var err error
		if strings.HasPrefix(name, "not base64") && !strings.Contains(name, "url") {
			_, err = b.DecodeBase64(c.s)
		} else {
			_, err = b.DecodeDataURL(c.s)
		}
		if codeOf(err) != c.code {
			t.Fatalf("%s: %v, want %s", name, err, c.code)
		}
		checkOwnWords(t, err)
	}
	// An over-long text is refused from its length, before decoding.
	lim := DefaultLimits()
	lim.MaxBytes = 1000
	huge := strings.Repeat("A", 1<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := NewBatch(lim).DecodeBase64(huge)
	runtime.ReadMemStats(&after)
	if codeOf(err) != CodeTooLarge {
		t.Fatalf("huge base64: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Fatalf("refusing a long base64 text allocated %d bytes", n)
	}
}
