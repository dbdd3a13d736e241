package imagein

import (
	"bytes"
	"encoding/binary"
)

var (
	magicPNG = []byte("\x89PNG\r\n\x1a\n")
)

// sniff names the format from the magic bytes, and names the formats it
// recognises but refuses.
func sniff(b []byte) (string, error) {
	switch {
	case bytes.HasPrefix(b, magicPNG):
		return PNG, nil
	case len(b) >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF:
		return JPEG, nil
	case len(b) >= 12 && string(b[0:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return WebP, nil
	case bytes.HasPrefix(b, []byte("GIF87a")) || bytes.HasPrefix(b, []byte("GIF89a")):
		return "", refuse(CodeUnsupported, "GIF images are not supported: send PNG, JPEG or WebP")
	case len(b) >= 12 && string(b[4:8]) == "ftyp":
		switch string(b[8:12]) {
		case "avif", "avis":
			return "", refuse(CodeUnsupported, "AVIF images are not supported: send PNG, JPEG or WebP")
		case "heic", "heix", "hevc", "heim", "heis", "mif1", "msf1":
			return "", refuse(CodeUnsupported, "HEIF images are not supported: send PNG, JPEG or WebP")
		}
	case bytes.HasPrefix(b, []byte("BM")):
		return "", refuse(CodeUnsupported, "BMP images are not supported: send PNG, JPEG or WebP")
	case bytes.HasPrefix(b, []byte("II*\x00")) || bytes.HasPrefix(b, []byte("MM\x00*")):
		return "", refuse(CodeUnsupported, "TIFF images are not supported: send PNG, JPEG or WebP")
	case bytes.HasPrefix(b, []byte{0xFF, 0x0A}) || bytes.HasPrefix(b, []byte("\x00\x00\x00\x0cJXL \r\n\x87\n")):
		return "", refuse(CodeUnsupported, "JPEG XL images are not supported: send PNG, JPEG or WebP")
	}
	return "", refuse(CodeUnsupported, "the data is not a PNG, JPEG or WebP image")
}

// walkPNG reads every chunk header: IHDR's dimensions, animation (acTL) and
// the size of the metadata chunks. The chunks must tile the file up to IEND.
func walkPNG(b []byte) (Header, error) {
	var h Header
	p := len(magicPNG)
	first := true
	for {
		if len(b)-p < 12 {
			return h, corrupt(PNG)
		}
		n := int64(binary.BigEndian.Uint32(b[p:]))
		typ := string(b[p+4 : p+8])
		if n > int64(len(b)-p-12) {
			return h, corrupt(PNG)
		}
		data := b[p+8 : p+8+int(n)]
		if first != (typ == "IHDR") {
			return h, corrupt(PNG)
		}
		first = false
		switch typ {
		case "IHDR":
			if n != 13 {
				return h, corrupt(PNG)
			}
			w, ht := binary.BigEndian.Uint32(data), binary.BigEndian.Uint32(data[4:])
			if w > 1<<30 || ht > 1<<30 {
				return h, refuse(CodeTooLarge, "the png image is %d×%d, over every limit", w, ht)
			}
			h.Width, h.Height = int(w), int(ht)
		case "acTL", "fcTL", "fdAT":
			return h, refuse(CodeAnimated, "animated PNG (APNG) images are not supported: send one frame")
		case "tEXt", "zTXt", "iTXt", "eXIf", "iCCP":
			h.Metadata += n
		case "IEND":
			return h, nil
		}
		p += 12 + int(n)
	}
}

// walkJPEG reads the marker segments up to the first scan: the frame's
// dimensions and components, and the size of the APPn and COM segments.
func walkJPEG(b []byte) (Header, error) {
	var h Header
	p := 2
	sof := false
	for {
		// Markers may be preceded by fill bytes 0xFF.
		for p < len(b) && b[p] == 0xFF && p+1 < len(b) && b[p+1] == 0xFF {
			p++
		}
		if len(b)-p < 4 || b[p] != 0xFF {
			return h, corrupt(JPEG)
		}
		m := b[p+1]
		if m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7) {
			p += 2
			continue
		}
		if m == 0xD9 {
			return h, corrupt(JPEG) // end of image before any scan
		}
		n := int(binary.BigEndian.Uint16(b[p+2:]))
		if n < 2 || n > len(b)-p-2 {
			return h, corrupt(JPEG)
		}
		seg := b[p+4 : p+2+n]
		switch {
		case m == 0xC0 || m == 0xC1 || m == 0xC2:
			if sof || len(seg) < 6 {
				return h, corrupt(JPEG)
			}
			sof = true
			h.Height = int(binary.BigEndian.Uint16(seg[1:]))
			h.Width = int(binary.BigEndian.Uint16(seg[3:]))
			switch seg[5] {
			case 1, 3:
			case 4:
				return h, refuse(CodeUnsupported, "CMYK JPEG images are not supported: convert the image to RGB")
			default:
				return h, corrupt(JPEG)
			}
			if seg[0] != 8 {
				return h, refuse(CodeUnsupported, "%d-bit JPEG images are not supported: send an 8-bit image", seg[0])
			}
		case m >= 0xC3 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC:
			return h, refuse(CodeUnsupported, "lossless, hierarchical and arithmetic-coded JPEG images are not supported")
		case m == 0xDA:
			if !sof {
				return h, corrupt(JPEG)
			}
			return h, nil
		case (m >= 0xE0 && m <= 0xEF) || m == 0xFE:
			h.Metadata += int64(n)
		}
		p += 2 + n
	}
}

// walkWebP reads the RIFF chunks: the canvas (VP8X) and the frame (VP8 or
// VP8L) dimensions, which must agree, animation, and the metadata chunks.
func walkWebP(b []byte) (Header, error) {
	var h Header
	riff := int64(binary.LittleEndian.Uint32(b[4:]))
	if riff < 4 || riff+8 > int64(len(b)) {
		return h, corrupt(WebP)
	}
	b = b[:riff+8]
	p := 12
	canvasW, canvasH := 0, 0
	frames := 0
	for p < len(b) {
		if len(b)-p < 8 {
			return h, corrupt(WebP)
		}
		typ := string(b[p : p+4])
		n := int64(binary.LittleEndian.Uint32(b[p+4:]))
		if n > int64(len(b)-p-8) {
			return h, corrupt(WebP)
		}
		data := b[p+8 : p+8+int(n)]
		switch typ {
		case "VP8X":
			if p != 12 || n < 10 {
				return h, corrupt(WebP)
			}
			if data[0]&0x02 != 0 {
				return h, refuse(CodeAnimated, "animated WebP images are not supported: send one frame")
			}
			canvasW = 1 + int(uint32(data[4])|uint32(data[5])<<8|uint32(data[6])<<16)
			canvasH = 1 + int(uint32(data[7])|uint32(data[8])<<8|uint32(data[9])<<16)
		case "ANIM", "ANMF":
			return h, refuse(CodeAnimated, "animated WebP images are not supported: send one frame")
		case "VP8 ":
			// frame tag (3 bytes), start code 9d 01 2a, 14-bit width and height.
			if len(data) < 10 || data[3] != 0x9d || data[4] != 0x01 || data[5] != 0x2a || data[0]&1 != 0 {
				return h, corrupt(WebP)
			}
			h.Width = int(binary.LittleEndian.Uint16(data[6:]) & 0x3fff)
			h.Height = int(binary.LittleEndian.Uint16(data[8:]) & 0x3fff)
			frames++
		case "VP8L":
			// signature 0x2f, then 14 bits width-1 and 14 bits height-1.
			if len(data) < 5 || data[0] != 0x2f {
				return h, corrupt(WebP)
			}
			v := binary.LittleEndian.Uint32(data[1:])
			h.Width = 1 + int(v&0x3fff)
			h.Height = 1 + int((v>>14)&0x3fff)
			frames++
		case "EXIF", "XMP ", "ICCP":
			h.Metadata += n
		}
		p += 8 + int(n) + int(n&1)
	}
	if frames != 1 {
		return h, corrupt(WebP)
	}
	if canvasW != 0 && (canvasW != h.Width || canvasH != h.Height) {
		return h, corrupt(WebP)
	}
	return h, nil
}
