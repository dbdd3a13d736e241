package imagein

import (
	"image"
	"image/color"
)

// toRGB packs m into 8-bit RGB. Alpha is dropped (the straight colour is
// kept), 16-bit samples keep their high byte, gray is replicated.
func toRGB(m image.Image) ([]byte, error) {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	out := make([]byte, 0, w*h*3)
	switch m := m.(type) {
	case *image.NRGBA:
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+w*4]
			for x := 0; x < w*4; x += 4 {
				out = append(out, row[x], row[x+1], row[x+2])
			}
		}
	case *image.RGBA:
		// Only opaque PNGs decode to RGBA, where premultiplied equals straight;
		// unpremultiply anyway so that the rule holds for any source.
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+w*4]
			for x := 0; x < w*4; x += 4 {
				out = appendNRGBA(out, color.RGBA{row[x], row[x+1], row[x+2], row[x+3]})
			}
		}
	case *image.Gray:
		for y := 0; y < h; y++ {
			for _, v := range m.Pix[y*m.Stride : y*m.Stride+w] {
				out = append(out, v, v, v)
			}
		}
	case *image.Gray16:
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+w*2]
			for x := 0; x < w*2; x += 2 {
				out = append(out, row[x], row[x], row[x])
			}
		}
	case *image.NRGBA64:
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+w*8]
			for x := 0; x < w*8; x += 8 {
				out = append(out, row[x], row[x+2], row[x+4])
			}
		}
	case *image.RGBA64:
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+w*8]
			for x := 0; x < w*8; x += 8 {
				c := color.RGBA64{
					uint16(row[x])<<8 | uint16(row[x+1]), uint16(row[x+2])<<8 | uint16(row[x+3]),
					uint16(row[x+4])<<8 | uint16(row[x+5]), uint16(row[x+6])<<8 | uint16(row[x+7]),
				}
				n := color.NRGBA64Model.Convert(c).(color.NRGBA64)
				out = append(out, byte(n.R>>8), byte(n.G>>8), byte(n.B>>8))
			}
		}
	case *image.Paletted:
		pal := make([][3]byte, len(m.Palette))
		for i, c := range m.Palette {
			n := color.NRGBAModel.Convert(c).(color.NRGBA)
			pal[i] = [3]byte{n.R, n.G, n.B}
		}
		for y := 0; y < h; y++ {
			for _, i := range m.Pix[y*m.Stride : y*m.Stride+w] {
				if int(i) >= len(pal) {
					return nil, corrupt(PNG)
				}
				out = append(out, pal[i][0], pal[i][1], pal[i][2])
			}
		}
	case *image.YCbCr:
		out = appendYCbCr(out, m)
	case *image.NYCbCrA:
		out = appendYCbCr(out, &m.YCbCr)
	case *image.CMYK:
		return nil, refuse(CodeUnsupported, "CMYK JPEG images are not supported: convert the image to RGB")
	default:
		return nil, refuse(CodeUnsupported, "the image's pixel layout is not supported")
	}
	return out, nil
}

func appendNRGBA(out []byte, c color.Color) []byte {
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	return append(out, n.R, n.G, n.B)
}

func appendYCbCr(out []byte, m *image.YCbCr) []byte {
	b := m.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			yi, ci := m.YOffset(x, y), m.COffset(x, y)
			r, g, bl := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
			out = append(out, r, g, bl)
		}
	}
	return out
}
