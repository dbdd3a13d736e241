package imagein

import (
	"strings"

	"github.com/modeld/modeld/backends"
)

// CodeRemote: an image given by an http(s) URL, which this package never fetches.
const CodeRemote = "remote_image_url"

// DecodeMessages decodes every image part of msgs in place, within lim for
// the whole request: a part's Data (raw bytes, as Ollama's images and
// Anthropic's base64 sources give them once decoded from JSON) or its data
// URL becomes its Image. A part that already has an Image is counted and
// kept. A part with another URL is refused with CodeRemote: a caller that
// allows remote images fetches them (through the pull network guard) into
// Data first. The first refused image's *Error, with its index in the
// request, is returned.
func DecodeMessages(msgs []backends.Message, lim Limits) error {
	b := NewBatch(lim)
	for i := range msgs {
		for j := range msgs[i].Parts {
			p := &msgs[i].Parts[j]
			if p.Type != backends.PartImage {
				continue
			}
			img, err := b.decodePart(p)
			if err != nil {
				return err
			}
			p.Image = img
		}
	}
	return nil
}

func (b *Batch) decodePart(p *backends.ContentPart) (*backends.Image, error) {
	switch {
	case p.Image != nil:
		return b.count(p.Image)
	case len(p.Data) > 0:
		return b.Decode(p.Data)
	case IsDataURL(p.URL):
		return b.DecodeDataURL(p.URL)
	case p.URL != "":
		scheme, _, _ := strings.Cut(p.URL, ":")
		if len(scheme) > 10 {
			scheme = scheme[:10]
		}
		return nil, at(refuse(CodeRemote, "image URLs other than data URLs are not fetched (this one is %q): send the image inline", strings.ToLower(scheme)+":"), b.n)
	}
	return nil, at(refuse(CodeEncoding, "the image part has no data"), b.n)
}

// count adds an already decoded image to the batch's totals.
func (b *Batch) count(img *backends.Image) (*backends.Image, error) {
	i := b.n
	if b.n >= b.lim.MaxImages {
		return nil, at(refuse(CodeTooMany, "the request has more than %d images", b.lim.MaxImages), i)
	}
	px := int64(img.Width) * int64(img.Height)
	if b.pixels+px > b.lim.MaxRequestPixels || b.bytes+int64(img.EncodedBytes) > b.lim.MaxRequestBytes {
		return nil, at(refuse(CodeTooLarge, "the request's images are over the limits together"), i)
	}
	b.n++
	b.pixels += px
	b.bytes += int64(img.EncodedBytes)
	return img, nil
}
