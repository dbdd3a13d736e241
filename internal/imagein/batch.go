package imagein

import (
	"encoding/base64"
	"strings"
)

// Batch decodes the images of one request, enforcing the per-request limits
// (count, total bytes, total pixels) on top of the per-image ones. Errors
// carry the image's index. A Batch is not safe for concurrent use.
type Batch struct {
	lim    Limits
	n      int
	bytes  int64
	pixels int64
}

// NewBatch starts a request's images under lim.
func NewBatch(lim Limits) *Batch { return &Batch{lim: lim} }

// Count is the number of images decoded so far.
func (b *Batch) Count() int { return b.n }

// Decode decodes the request's next image from its encoded bytes.
func (b *Batch) Decode(data []byte) (*Image, error) {
	i := b.n
	if b.n >= b.lim.MaxImages {
		return nil, at(refuse(CodeTooMany, "the request has more than %d images", b.lim.MaxImages), i)
	}
	if b.bytes+int64(len(data)) > b.lim.MaxRequestBytes {
		return nil, at(refuse(CodeTooLarge, "the request's images are over %d bytes together", b.lim.MaxRequestBytes), i)
	}
	h, err := Inspect(data, b.lim)
	if err != nil {
		return nil, at(err, i)
	}
	px := int64(h.Width) * int64(h.Height)
	if b.pixels+px > b.lim.MaxRequestPixels {
		return nil, at(refuse(CodeTooLarge, "the request's images are over %d pixels together", b.lim.MaxRequestPixels), i)
	}
	img, err := Decode(data, b.lim)
	if err != nil {
		return nil, at(err, i)
	}
	b.n++
	b.bytes += int64(len(data))
	b.pixels += px
	return img, nil
}

// DecodeBase64 decodes the request's next image from standard base64 (padded
// or not; ASCII whitespace is ignored), as Ollama's images and Anthropic's
// base64 sources carry it. The encoded length is checked against MaxBytes
// before anything is decoded.
func (b *Batch) DecodeBase64(s string) (*Image, error) {
	data, err := b.base64(s)
	if err != nil {
		return nil, at(err, b.n)
	}
	return b.Decode(data)
}

// DecodeDataURL decodes the request's next image from a data URL
// ("data:image/png;base64,..."). The declared media type is not trusted: the
// format comes from the bytes. A URL of another scheme is an error; fetching
// remote images is the caller's decision.
func (b *Batch) DecodeDataURL(u string) (*Image, error) {
	payload, err := dataURLPayload(u)
	if err != nil {
		return nil, at(err, b.n)
	}
	return b.DecodeBase64(payload)
}

// IsDataURL reports whether u is a data URL (its scheme, case-insensitive).
func IsDataURL(u string) bool {
	return len(u) >= 5 && strings.EqualFold(u[:5], "data:")
}

func dataURLPayload(u string) (string, error) {
	if !IsDataURL(u) {
		return "", refuse(CodeEncoding, "the image URL is not a data URL")
	}
	meta, payload, ok := strings.Cut(u[5:], ",")
	if !ok {
		return "", refuse(CodeEncoding, "the data URL has no comma before its data")
	}
	params := strings.Split(meta, ";")
	if !strings.EqualFold(strings.TrimSpace(params[len(params)-1]), "base64") {
		return "", refuse(CodeEncoding, "the data URL is not base64-encoded")
	}
	return payload, nil
}

func (b *Batch) base64(s string) ([]byte, error) {
	// Whitespace may inflate the text; anything longer than base64 of
	// MaxBytes plus a line break every 64 characters is over the limit.
	max := b.lim.MaxBytes
	if int64(len(s)) > (max+2)/3*4+(max/48)*2+4 {
		return nil, refuse(CodeTooLarge, "the image is over the limit of %d bytes", max)
	}
	if strings.ContainsAny(s, " \t\r\n") {
		s = strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
				return -1
			}
			return r
		}, s)
	}
	enc := base64.StdEncoding.Strict()
	if len(s)%4 != 0 {
		enc = base64.RawStdEncoding.Strict()
	}
	data, err := enc.DecodeString(s)
	if err != nil {
		return nil, refuse(CodeEncoding, "the image is not valid base64")
	}
	return data, nil
}
