package llama

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"slices"
	"testing"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/engine"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/imagein"
)

// visionPNG is a generated w×h PNG, decoded as the daemon decodes a
// request's image.
func visionPNG(t *testing.T, w, h int, seed uint8) *backends.Image {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.NRGBA{uint8(x*5) ^ seed, uint8(y * 11), seed, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	dec, err := imagein.Decode(buf.Bytes(), imagein.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return dec
}

func visionMessages(text string, imgs ...*backends.Image) []Message {
	parts := []backends.ContentPart{{Type: backends.PartText, Text: text}}
	for _, img := range imgs {
		parts = append(parts, backends.ContentPart{Type: backends.PartImage, Image: img, WireType: "image_url"})
	}
	return []Message{{Role: "user", Content: text, Parts: parts}}
}

// TestRunnerVision: a runner started with the model's projector reads
// images as the engine does in-process (same prompt, same greedy tokens,
// usage counting the image tokens); broken pixels are a 400 and the runner
// answers after; a runner without a projector refuses images with the
// typed error, across the socket.
func TestRunnerVision(t *testing.T) {
	initLib(t)
	if err := engine.MultimodalError(); err != nil {
		t.Fatalf("llama.cpp's multimodal library is needed: %v (make test-deps installs it)", err)
	}
	dir := t.TempDir()
	proj := filepath.Join(dir, "mmproj.gguf")
	if err := ggufgen.WriteProjectorFile(proj, ggufgen.TinyProjector()); err != nil {
		t.Fatal(err)
	}
	path := genModel(t, ggufgen.Tiny(ggufgen.SPM))
	opts := Options{Slots: 2, ContextSize: 512, Projector: proj}
	m, err := engine.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r := startRunner(t, path, opts)
	if !r.Info().Vision {
		t.Fatalf("runner info %+v: Vision false", r.Info())
	}

	msgs := visionMessages("what is this?", visionPNG(t, 48, 30, 7))
	prompt, err := r.ChatPrompt(msgs, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := m.ChatPrompt(msgs, nil, true)
	if !slices.Equal(prompt, want) || backends.PromptImageTokens(prompt) != ggufgen.TinyProjector().ImageTokens() {
		t.Fatalf("runner prompt %v, in-process %v", prompt, want)
	}
	req := Request{Prompt: prompt, Messages: msgs, MaxTokens: 12}
	var got, ref []int32
	var final Event
	for ev := range mustGenerate(t, r, req) {
		if ev.Done {
			final = ev
			continue
		}
		got = append(got, ev.Token)
	}
	ch, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for ev := range ch {
		if !ev.Done {
			ref = append(ref, ev.Token)
		}
	}
	if final.Err != nil || final.Usage.PromptTokens != len(prompt) || !slices.Equal(got, ref) {
		t.Fatalf("runner: %v (final %+v), in-process %v", got, final, ref)
	}

	broken := visionMessages("what is this?", &backends.Image{Format: "png", Width: 5, Height: 5, RGB: []byte{1, 2, 3}})
	if _, err := r.ChatPrompt(broken, nil, true); !errors.Is(err, backends.ErrInvalidRequest) {
		t.Fatalf("broken pixels: %v, want an invalid request", err)
	}
	if _, err := r.Generate(context.Background(), Request{Prompt: prompt, Messages: broken, MaxTokens: 2}); !errors.Is(err, backends.ErrInvalidRequest) {
		t.Fatalf("broken pixels in a generation: %v, want an invalid request", err)
	}
	n := 0
	for ev := range mustGenerate(t, r, req) {
		if !ev.Done {
			n++
		} else if ev.Err != nil {
			t.Fatalf("after broken images: %v", ev.Err)
		}
	}
	if n != 12 || r.Err() != nil {
		t.Fatalf("after broken images: %d tokens, runner %v", n, r.Err())
	}

	text := startRunner(t, path, Options{Slots: 1, ContextSize: 256})
	var ie *backends.ImageInputError
	if _, err := text.ChatPrompt(msgs, nil, true); !errors.As(err, &ie) || ie.Images != 1 {
		t.Fatalf("text-only runner: %v, want an *ImageInputError", err)
	}
}
