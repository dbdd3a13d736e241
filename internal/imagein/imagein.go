package imagein

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"

	"github.com/modeld/modeld/backends"
	"golang.org/x/image/webp"
)

// Accepted formats, as Image.Format names them.
const (
	PNG  = "png"
	JPEG = "jpeg"
	WebP = "webp"
)

// MediaType is the MIME type of an accepted format ("image/png").
func MediaType(format string) string { return "image/" + format }

// Limits bound what one image and one request may cost. Check refuses a
// field that is zero or negative; DefaultLimits gives the daemon's values.
type Limits struct {
	// MaxBytes is one image's encoded size.
	MaxBytes int64
	// MaxPixels is one image's width×height, checked from the header before
	// any pixel is decoded.
	MaxPixels int64
	// MaxSide is the longest accepted width or height.
	MaxSide int
	// MaxMetadataBytes is the sum of one image's metadata (EXIF, XMP, ICC,
	// text chunks).
	MaxMetadataBytes int64
	// MaxImages is the number of images in one request.
	MaxImages int
	// MaxRequestBytes and MaxRequestPixels bound all images of one request.
	MaxRequestBytes  int64
	MaxRequestPixels int64
}

// Defaults. 1<<24 pixels (a 4096×4096 image, a 12-megapixel photo) decodes
// into at most 64 MiB; a request's images together into at most 256 MiB of RGB.
const (
	DefaultMaxBytes         = 20 << 20
	DefaultMaxPixels        = 1 << 24
	DefaultMaxSide          = 16384
	DefaultMaxMetadataBytes = 1 << 20
	DefaultMaxImages        = 64
	DefaultMaxRequestBytes  = 64 << 20
	DefaultMaxRequestPixels = 1 << 26
)

// Check reports every field that is not positive.
func (l Limits) Check() error {
	var errs []error
	for name, v := range map[string]int64{
		"max bytes": l.MaxBytes, "max pixels": l.MaxPixels, "max side": int64(l.MaxSide),
		"max metadata bytes": l.MaxMetadataBytes, "max images": int64(l.MaxImages),
		"max request bytes": l.MaxRequestBytes, "max request pixels": l.MaxRequestPixels,
	} {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("image limits: %s is %d, want more than 0", name, v))
		}
	}
	return errors.Join(errs...)
}

// DefaultLimits returns the limits the daemon applies unless configured.
func DefaultLimits() Limits {
	return Limits{
		MaxBytes: DefaultMaxBytes, MaxPixels: DefaultMaxPixels, MaxSide: DefaultMaxSide,
		MaxMetadataBytes: DefaultMaxMetadataBytes, MaxImages: DefaultMaxImages,
		MaxRequestBytes: DefaultMaxRequestBytes, MaxRequestPixels: DefaultMaxRequestPixels,
	}
}

// Image is a decoded image (backends.Image): 8-bit RGB, row-major, no
// padding, with the SHA-256 of the encoded bytes.
type Image = backends.Image

// Header is what the container says about an image, read without decoding.
type Header struct {
	Format        string
	Width, Height int
	Metadata      int64 // bytes of metadata chunks and segments
}

// Inspect sniffs the format and reads the header of data, refusing
// everything Decode refuses except corrupt pixel data. It allocates nothing
// in proportion to the image's dimensions.
func Inspect(data []byte, lim Limits) (Header, error) {
	if int64(len(data)) > lim.MaxBytes {
		return Header{}, refuse(CodeTooLarge, "the image is %d bytes, over the limit of %d", len(data), lim.MaxBytes)
	}
	if len(data) == 0 {
		return Header{}, refuse(CodeCorrupt, "the image is empty")
	}
	f, err := sniff(data)
	if err != nil {
		return Header{}, err
	}
	var h Header
	switch f {
	case PNG:
		h, err = walkPNG(data)
	case JPEG:
		h, err = walkJPEG(data)
	case WebP:
		h, err = walkWebP(data)
	}
	if err != nil {
		return Header{}, err
	}
	h.Format = f
	if h.Width < 1 || h.Height < 1 {
		return Header{}, refuse(CodeCorrupt, "the %s image is %d×%d: an image needs at least one pixel", f, h.Width, h.Height)
	}
	if h.Width > lim.MaxSide || h.Height > lim.MaxSide || int64(h.Width)*int64(h.Height) > lim.MaxPixels {
		return Header{}, refuse(CodeTooLarge, "the %s image is %d×%d, over the limit of %d pixels (%d on a side)",
			f, h.Width, h.Height, lim.MaxPixels, lim.MaxSide)
	}
	if h.Metadata > lim.MaxMetadataBytes {
		return Header{}, refuse(CodeTooLarge, "the %s image carries %d bytes of metadata, over the limit of %d", f, h.Metadata, lim.MaxMetadataBytes)
	}
	return h, nil
}

// Decode decodes one image within lim.
func Decode(data []byte, lim Limits) (*Image, error) {
	h, err := Inspect(data, lim)
	if err != nil {
		return nil, err
	}
	// The standard decoders read their own header again: it must agree with ours.
	cfg, err := decodeConfig(h.Format, data)
	if err != nil || cfg.Width != h.Width || cfg.Height != h.Height {
		return nil, corrupt(h.Format)
	}
	m, err := decodePixels(h.Format, data)
	if err != nil {
		return nil, err
	}
	b := m.Bounds()
	if b.Dx() != h.Width || b.Dy() != h.Height {
		return nil, corrupt(h.Format)
	}
	rgb, err := toRGB(m)
	if err != nil {
		return nil, err
	}
	return &Image{Format: h.Format, Width: h.Width, Height: h.Height, RGB: rgb, Digest: sha256.Sum256(data), EncodedBytes: len(data)}, nil
}

func corrupt(f string) *Error {
	return refuse(CodeCorrupt, "the %s image is truncated or corrupt", f)
}

func decodeConfig(f string, data []byte) (cfg image.Config, err error) {
	defer func() {
		if recover() != nil {
			err = corrupt(f)
		}
	}()
	r := bytes.NewReader(data)
	switch f {
	case PNG:
		return png.DecodeConfig(r)
	case JPEG:
		return jpeg.DecodeConfig(r)
	default:
		return webp.DecodeConfig(r)
	}
}

// decodePixels runs the standard decoder; its messages are not passed on
// (they are the decoder's words, not modeld's), and a panic is a corrupt file.
func decodePixels(f string, data []byte) (m image.Image, err error) {
	defer func() {
		if recover() != nil {
			m, err = nil, corrupt(f)
		}
	}()
	r := bytes.NewReader(data)
	switch f {
	case PNG:
		m, err = png.Decode(r)
	case JPEG:
		m, err = jpeg.Decode(r)
	default:
		m, err = webp.Decode(r)
	}
	if err != nil {
		return nil, corrupt(f)
	}
	return m, nil
}
