package imagein

import (
	"fmt"
	"net/http"

	"github.com/modeld/modeld/backends"
)

// Error is why an image was refused. It is the caller's fault: HTTPStatus is
// 400 and errors.Is(err, backends.ErrInvalidRequest) holds. Msg is modeld's
// own text, safe to show the client.
type Error struct {
	// Index is the image's position in its request (0-based), or -1 when the
	// error is not about one image.
	Index int
	// Code is a stable machine-readable reason (see the Code* constants).
	Code string
	Msg  string
}

// Reasons an image is refused.
const (
	CodeTooLarge    = "image_too_large"    // bytes or pixels over the limits
	CodeTooMany     = "too_many_images"    // images per request over the limit
	CodeUnsupported = "unsupported_image"  // a format or variant modeld does not decode
	CodeCorrupt     = "invalid_image"      // truncated, corrupt or degenerate data
	CodeAnimated    = "animated_image"     // more than one frame
	CodeEncoding    = "invalid_image_data" // bad base64 or data URL
)

func (e *Error) Error() string {
	if e.Index < 0 {
		return e.Msg
	}
	return fmt.Sprintf("image %d: %s", e.Index, e.Msg)
}

// HTTPStatus is 400: the request carried the image.
func (e *Error) HTTPStatus() int { return http.StatusBadRequest }

// ErrorCode is Code.
func (e *Error) ErrorCode() string { return e.Code }

// Is makes errors.Is(err, backends.ErrInvalidRequest) true.
func (e *Error) Is(target error) bool { return target == backends.ErrInvalidRequest }

func refuse(code, format string, args ...any) *Error {
	return &Error{Index: -1, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// at returns err with its Index set, if it is an *Error.
func at(err error, i int) error {
	if e, ok := err.(*Error); ok {
		c := *e
		c.Index = i
		return &c
	}
	return err
}
