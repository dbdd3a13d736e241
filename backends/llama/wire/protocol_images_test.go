package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/modeld/modeld/backends"
)

// TestImageInputErrorCrossesTheSocket: a text-only model's refusal of images,
// made in the runner, is the same typed error in the daemon.
func TestImageInputErrorCrossesTheSocket(t *testing.T) {
	orig := fmt.Errorf("chat prompt: %w", &backends.ImageInputError{Images: 3, Param: "messages"})
	b, err := json.Marshal(FromError(orig))
	if err != nil {
		t.Fatal(err)
	}
	var w Error
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	got := w.ToError()
	var ie *backends.ImageInputError
	if !errors.As(got, &ie) || ie.Images != 3 || ie.Param != "messages" {
		t.Fatalf("%v (%s) lost its *ImageInputError", got, b)
	}
	if !errors.Is(got, backends.ErrInvalidRequest) || got.Error() != orig.Error() {
		t.Fatalf("%v: not an invalid request with the same text", got)
	}
}
