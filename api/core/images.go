package core

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/imagein"
	"github.com/modeld/modeld/models"
)

// ImageLimits bound the images of one chat request (bytes, pixels, count),
// checked before any pixel is decoded. A request's pixels together are
// bounded at 1<<24 (the RGB of a chat request crosses the runner socket,
// whose messages are bounded).
var ImageLimits = chatImageLimits()

func chatImageLimits() imagein.Limits {
	l := imagein.DefaultLimits()
	l.MaxRequestPixels = 1 << 24
	return l
}

// decodeImages decodes the image parts of msgs in place (internal/imagein:
// memory-safe decoders, the pixels bounded from the header first) before
// any model is acquired, so that a hostile or broken image loads nothing.
// A part given by http(s) URL is left for FetchImages. A refusal is a 400
// at param, with imagein's code and its own text (never a decoder's).
func decodeImages(msgs []backends.Message, param string) error {
	if backends.CountImages(msgs) == 0 || remoteImages(msgs) > 0 {
		return nil // FetchImages decodes them all once fetched
	}
	return imageError(imagein.DecodeMessages(msgs, ImageLimits), param)
}

// remoteImages counts the image parts given by http(s) URL, not yet read.
func remoteImages(msgs []backends.Message) int {
	n := 0
	for _, m := range msgs {
		for _, p := range m.Parts {
			if unreadRemote(p) {
				n++
			}
		}
	}
	return n
}

// unreadRemote: p is an image given by http(s) URL whose bytes are not read.
func unreadRemote(p backends.ContentPart) bool {
	if p.Type != backends.PartImage || p.Image != nil || len(p.Data) > 0 {
		return false
	}
	scheme, _, _ := strings.Cut(p.URL, ":")
	scheme = strings.ToLower(scheme)
	return scheme == "http" || scheme == "https"
}

// FetchImages reads the images msgs give by http(s) URL, when the daemon
// allows it (Options.FetchImage, through the pull's network guard), and
// decodes every image of msgs within ImageLimits; without FetchImage such
// an image is refused (remote_image_url). Every path that hands msgs to a
// model calls it first (StartChat; tokenize and count_tokens too).
func (s *Core) FetchImages(ctx context.Context, msgs []backends.Message, param string) error {
	if remoteImages(msgs) == 0 {
		return nil
	}
	if s.Opt.FetchImage != nil {
		for i := range msgs {
			for j := range msgs[i].Parts {
				p := &msgs[i].Parts[j]
				if !unreadRemote(*p) {
					continue
				}
				data, err := s.Opt.FetchImage(ctx, p.URL, ImageLimits.MaxBytes)
				if err != nil {
					// The answer says which rule refused, never what the
					// name resolved to or what the far end said.
					s.Log.Debug("remote image not read", "err", err)
					why := "could not be read"
					if errors.Is(err, models.ErrPrivateTarget) {
						why = "points at a loopback, link-local or private address, which modeld does not fetch"
					}
					return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "remote_image_unreadable", Param: &param,
						Message: "an image URL " + why}
				}
				p.Data = data
			}
		}
	}
	return imageError(imagein.DecodeMessages(msgs, ImageLimits), param)
}

// imageError is imagein's refusal as a 400 at param.
func imageError(err error, param string) error {
	var ie *imagein.Error
	if errors.As(err, &ie) {
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: ie.Code, Param: &param, Message: ie.Error()}
	}
	return err
}

// imageParam names a backend's refusal of images (a model without a
// projector) with the request's model and field.
func imageParam(err error, model, param string) error {
	var ie *backends.ImageInputError
	if errors.As(err, &ie) {
		named := *ie
		if named.Param == "" {
			named.Param = param
		}
		if named.Model == "" {
			named.Model = model
		}
		return &named
	}
	return err
}
