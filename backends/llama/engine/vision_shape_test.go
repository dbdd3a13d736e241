package engine

import (
	"testing"

	"github.com/modeld/modeld/backends"
)

// TestVisionOddShapes: the shapes internal/imagein lets through at its
// edges (one pixel, one row or column as long as its longest side, a
// large square) are read without harm to the model, which answers after.
func TestVisionOddShapes(t *testing.T) {
	m := openVisionModel(t, Options{Slots: 1})
	flat := func(w, h int) *backends.Image {
		return &backends.Image{Format: "png", Width: w, Height: h, RGB: make([]byte, w*h*3)}
	}
	for _, img := range []*backends.Image{flat(1, 1), flat(16384, 1), flat(1, 16384), flat(3, 2000), flat(2048, 2048)} {
		msgs := imageMessages("what?", img)
		prompt, err := m.ChatPrompt(msgs, nil, true)
		if err != nil {
			t.Fatalf("%dx%d: %v", img.Width, img.Height, err)
		}
		res := drain(t, mustGenerate(t, m, Request{Prompt: prompt, Messages: msgs, MaxTokens: 2}))
		if res.final.Err != nil || res.final.Usage.PromptTokens != len(prompt) {
			t.Fatalf("%dx%d: %+v", img.Width, img.Height, res.final)
		}
	}
}
