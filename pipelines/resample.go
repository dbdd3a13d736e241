package pipelines

import "math"

// resample scales m to w×h the way transformers.js does under Node: sharp's
// affine transform (libvips) with the corner convention (output pixel X reads
// input position X·(in/out)), black outside the image, and libvips's
// fixed-point 8-bit interpolators. Nearest, bilinear and bicubic
// (Catmull-Rom) are supported. Against transformers.js's goldens
// (TestImagePreprocessGoldens): bilinear is equal to the byte when the
// scale's inverse is a multiple of 1/64 (32 from 20, 24, 40, 48, 56, 64 or
// 97); otherwise, and for bicubic, within one level in 3-6% of samples
// (libvips derives its sampling positions in a way this does not reproduce).
func resample(m rgbImage, w, h, method int) rgbImage {
	out := rgbImage{w: w, h: h, pix: make([]byte, w*h*3)}
	px := func(x, y, c int) int {
		if x < 0 || y < 0 || x >= m.w || y >= m.h {
			return 0
		}
		return int(m.pix[(y*m.w+x)*3+c])
	}
	sx, sy := float64(m.w)/float64(w), float64(m.h)/float64(h)
	for Y := 0; Y < h; Y++ {
		fy := float64(Y) * sy
		for X := 0; X < w; X++ {
			fx := float64(X) * sx
			o := out.pix[(Y*w+X)*3:][:3]
			switch method {
			case 0:
				ix, iy := int(math.Floor(fx)), int(math.Floor(fy))
				for c := 0; c < 3; c++ {
					o[c] = byte(px(ix, iy, c))
				}
			case 3:
				ix, iy := int(math.Floor(fx)), int(math.Floor(fy))
				cx := &bicubicTable[int(math.Floor((fx-float64(ix))*transformScale+0.5))]
				cy := &bicubicTable[int(math.Floor((fy-float64(iy))*transformScale+0.5))]
				for c := 0; c < 3; c++ {
					acc := 0
					for j := 0; j < 4; j++ {
						r := 0
						for i := 0; i < 4; i++ {
							r += cx[i] * px(ix-1+i, iy-1+j, c)
						}
						acc += cy[j] * ((r + interpHalf) >> interpShift)
					}
					o[c] = byte(min(255, max(0, (acc+interpHalf)>>interpShift)))
				}
			default:
				qx, qy := int(math.Floor(fx*interpScale)), int(math.Floor(fy*interpScale))
				xf, yf := qx&(interpScale-1), qy&(interpScale-1)
				ix, iy := qx>>interpShift, qy>>interpShift
				s1 := ((interpScale - xf) * (interpScale - yf)) >> interpShift
				s2 := (xf * (interpScale - yf)) >> interpShift
				s3 := ((interpScale - xf) * yf) >> interpShift
				s4 := (xf * yf) >> interpShift
				for c := 0; c < 3; c++ {
					v := s1*px(ix, iy, c) + s2*px(ix+1, iy, c) + s3*px(ix, iy+1, c) + s4*px(ix+1, iy+1, c)
					o[c] = byte((v + interpHalf) >> interpShift)
				}
			}
		}
	}
	return out
}

// libvips's fixed point: weights in 1/4096, bicubic positions in 1/64.
const (
	interpShift    = 12
	interpScale    = 1 << interpShift
	interpHalf     = 1 << (interpShift - 1)
	transformScale = 64
)

// bicubicTable holds the Catmull-Rom weights of taps -1, 0, 1, 2 at each
// position t = i/64, in 1/4096.
var bicubicTable = func() (tab [transformScale + 1][4]int) {
	for i := range tab {
		t := float64(i) / transformScale
		w := [4]float64{
			-0.5*t + t*t - 0.5*t*t*t,
			1 - 2.5*t*t + 1.5*t*t*t,
			0.5*t + 2*t*t - 1.5*t*t*t,
			-0.5*t*t + 0.5*t*t*t,
		}
		for j, v := range w {
			tab[i][j] = int(math.Floor(v*interpScale + 0.5))
		}
	}
	return tab
}()
