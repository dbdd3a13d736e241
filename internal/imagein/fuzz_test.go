package imagein

import (
	"errors"
	"image/color"
	"testing"
)

// FuzzDecodeImage feeds arbitrary bytes to Decode under small limits: it must
// never panic, a success must be a raster of the size it claims within the
// limits, and a failure must be an *Error in modeld's own words.
func FuzzDecodeImage(f *testing.F) {
	green := color.NRGBA{0, 10, 0, 255}
	f.Add(encPNG(f, pattern(5, 4)))
	f.Add(encJPEG(f, pattern(9, 9)))
	f.Add(riff(vp8l(3, 2, green, color.NRGBA{0, 99, 0, 255}, func(x, y int) bool { return x == y })))
	f.Add(riff(vp8x(0x10, 3, 3), vp8l(3, 3, green, green, nil)))
	f.Add(riff(vp8Header(8, 8, 32)))
	f.Add(jpegCMYK(4, 4))
	f.Add(pngHeaderOnly(2, 2))
	for _, c := range hostile(f) {
		if len(c.data) < 1<<16 {
			f.Add(c.data)
		}
	}
	lim := DefaultLimits()
	lim.MaxPixels = 1 << 16
	lim.MaxSide = 1024
	lim.MaxBytes = 1 << 20
	lim.MaxMetadataBytes = 1 << 12
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := Decode(data, lim)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code == "" || e.Msg == "" {
				t.Fatalf("error %v is not an *Error", err)
			}
			checkOwnWords(t, err)
			return
		}
		if img.Width < 1 || img.Height < 1 || int64(img.Width)*int64(img.Height) > lim.MaxPixels {
			t.Fatalf("decoded %d×%d outside the limits", img.Width, img.Height)
		}
		if len(img.RGB) != img.Width*img.Height*3 {
			t.Fatalf("%d×%d image with %d bytes of RGB", img.Width, img.Height, len(img.RGB))
		}
	})
}
