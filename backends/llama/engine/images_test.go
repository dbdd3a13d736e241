package engine

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/ggufgen"
)

// TestTextModelRefusesImages: a chat request with an image part, as a
// dialect hands it down, is refused by a text-only model with a typed 400
// that names the count, before any template or token work.
func TestTextModelRefusesImages(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(bothVocabs[0]), Options{Slots: 1})
	img := &backends.Image{Format: "png", Width: 1, Height: 1, RGB: []byte{1, 2, 3}}
	msgs := []Message{
		{Role: "user", Content: "what is this?", Parts: []backends.ContentPart{
			{Type: backends.PartText, Text: "what is this?"},
			{Type: backends.PartImage, Image: img, WireType: "image_url"},
			{Type: backends.PartImage, Image: img, WireType: "image_url"},
		}},
	}
	_, err := m.ChatPrompt(msgs, nil, true)
	var ie *backends.ImageInputError
	if !errors.As(err, &ie) || ie.Images != 2 {
		t.Fatalf("ChatPrompt with images = %v, want an *ImageInputError for 2 images", err)
	}
	var se backends.StatusError
	if !errors.Is(err, backends.ErrInvalidRequest) || !errors.As(err, &se) || se.HTTPStatus() != http.StatusBadRequest {
		t.Fatalf("%v is not a 400 invalid request", err)
	}
	if c, ok := err.(backends.Coder); !ok || c.ErrorCode() != "image_input_unsupported" || !strings.Contains(err.Error(), "image input") {
		t.Fatalf("error %q lacks its code or reason", err)
	}
	// The same request without its images renders.
	msgs[0].Parts = msgs[0].Parts[:1]
	if _, err := m.ChatPrompt(msgs, nil, true); err != nil {
		t.Fatal(err)
	}
}
