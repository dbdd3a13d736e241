package core

import (
	"errors"
	"net/http"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/imagein"
)

// ImageLimits bound the images of one chat request (bytes, pixels, count),
// checked before any pixel is decoded.
var ImageLimits = imagein.DefaultLimits()

// decodeImages decodes the image parts of msgs in place (internal/imagein:
// memory-safe decoders, the pixels bounded from the header first) before
// any model is acquired, so that a hostile or broken image loads nothing.
// A refusal is a 400 at param, with imagein's code and its own text (never
// a decoder's).
func decodeImages(msgs []backends.Message, param string) error {
	if backends.CountImages(msgs) == 0 {
		return nil
	}
	err := imagein.DecodeMessages(msgs, ImageLimits)
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
