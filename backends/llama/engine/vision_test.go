package engine

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/imagein"
)

// requireMultimodal fails the test when llama.cpp's multimodal library is
// not in the lib dir: vision is tested against the real library.
func requireMultimodal(t testing.TB) {
	t.Helper()
	initLib(t)
	if err := MultimodalError(); err != nil {
		t.Fatalf("llama.cpp's multimodal library is needed: %v (make test-deps installs it)", err)
	}
}

// genProjector writes the tiny projector into the test's temp dir.
func genProjector(t testing.TB, o ggufgen.ProjectorOptions) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mmproj.gguf")
	if err := ggufgen.WriteProjectorFile(path, o); err != nil {
		t.Fatal(err)
	}
	return path
}

// openVisionModel opens the tiny SPM chat model with its tiny projector.
func openVisionModel(t testing.TB, opts Options) *Model {
	t.Helper()
	requireMultimodal(t)
	opts.Projector = genProjector(t, ggufgen.TinyProjector())
	m := openModel(t, ggufgen.Tiny(ggufgen.SPM), opts)
	if !m.Info().Vision {
		t.Fatalf("a model opened with its projector says Vision false (%q)", m.Info().VisionOff)
	}
	return m
}

// testPNG encodes a w×h PNG whose pixels depend on seed, and decodes it
// as a dialect's request would be (internal/imagein).
func testPNG(t testing.TB, w, h int, seed uint8) *backends.Image {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x*7) + seed, uint8(y*13) ^ seed, seed * 3, 255})
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

func imageMessages(text string, imgs ...*backends.Image) []Message {
	parts := []backends.ContentPart{{Type: backends.PartText, Text: text}}
	for _, img := range imgs {
		parts = append(parts, backends.ContentPart{Type: backends.PartImage, Image: img, WireType: "image_url"})
	}
	return []Message{{Role: "user", Content: text, Parts: parts}}
}

// TestVisionPromptCountsImageTokens: a chat prompt with an image is the
// text-only prompt's tokens plus one run of image tokens as long as mtmd
// makes the image ((32/8)² = 16 for the tiny projector), and a generation
// from it reports exactly that many prompt tokens.
func TestVisionPromptCountsImageTokens(t *testing.T) {
	m := openVisionModel(t, Options{Slots: 2})
	want := ggufgen.TinyProjector().ImageTokens()
	text, err := m.ChatPrompt(imageMessages("what is in this picture?"), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2} {
		imgs := make([]*backends.Image, n)
		for i := range imgs {
			imgs[i] = testPNG(t, 40+i*9, 24, uint8(i))
		}
		msgs := imageMessages("what is in this picture?", imgs...)
		prompt, err := m.ChatPrompt(msgs, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := backends.PromptImageTokens(prompt); got != n*want {
			t.Fatalf("%d image(s): %d image tokens, want %d", n, got, n*want)
		}
		if len(prompt) != len(text)+n*want {
			t.Fatalf("%d image(s): %d prompt tokens, want the text's %d + %d", n, len(prompt), len(text), n*want)
		}
		nonImage := slices.DeleteFunc(slices.Clone(prompt), func(id int32) bool { return id == backends.ImageToken })
		if !slices.Equal(nonImage, text) {
			t.Fatalf("%d image(s): the text tokens around the images differ from the text-only prompt", n)
		}
		res := drain(t, mustGenerate(t, m, Request{Prompt: prompt, Messages: msgs, MaxTokens: 6}))
		if res.final.Err != nil || res.final.Usage.PromptTokens != len(prompt) || res.final.Usage.CompletionTokens != 6 {
			t.Fatalf("%d image(s): final %+v, want %d prompt and 6 completion tokens", n, res.final, len(prompt))
		}
	}
}

func mustGenerate(t testing.TB, m *Model, req Request) <-chan Event {
	t.Helper()
	ch, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestVisionGenerationReadsTheImage: greedy output from the same image is
// the same every time (streamed events add up to the same text), another
// image gives another answer, and a 1×1 image is read too.
func TestVisionGenerationReadsTheImage(t *testing.T) {
	m := openVisionModel(t, Options{Slots: 2})
	run := func(img *backends.Image) result {
		msgs := imageMessages("describe it", img)
		prompt, err := m.ChatPrompt(msgs, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		res := drain(t, mustGenerate(t, m, Request{Prompt: prompt, Messages: msgs, MaxTokens: 24}))
		if res.final.Err != nil || len(res.tokens) == 0 {
			t.Fatalf("generation: %+v", res.final)
		}
		return res
	}
	a, b := testPNG(t, 64, 64, 1), testPNG(t, 64, 64, 200)
	first, again := run(a), run(a)
	if !slices.Equal(first.tokens, again.tokens) || first.text != again.text {
		t.Fatalf("the same image gave %v then %v", first.tokens, again.tokens)
	}
	if other := run(b); slices.Equal(other.tokens, first.tokens) {
		t.Fatalf("two different images gave the same %d tokens: the image is not read", len(first.tokens))
	}
	run(testPNG(t, 1, 1, 9))
}

// TestVisionPromptSkipsPrefixReuse: a prompt with an image never reuses
// the KV of a text prompt sharing its prefix, and a text prompt after it
// reuses nothing of the image's KV and answers as it did the first time.
func TestVisionPromptSkipsPrefixReuse(t *testing.T) {
	m := openVisionModel(t, Options{Slots: 1})
	long := "tell me a long story about a cat that lived on a boat and sailed the seas"
	textMsgs := imageMessages(long)
	textPrompt, err := m.ChatPrompt(textMsgs, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	before := drain(t, mustGenerate(t, m, Request{Prompt: textPrompt, Messages: textMsgs, MaxTokens: 8}))
	imgMsgs := imageMessages(long, testPNG(t, 32, 32, 5))
	imgPrompt, err := m.ChatPrompt(imgMsgs, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	res := drain(t, mustGenerate(t, m, Request{Prompt: imgPrompt, Messages: imgMsgs, MaxTokens: 8}))
	if res.final.Err != nil || res.final.Usage.CachedTokens != 0 {
		t.Fatalf("image prompt after its text prefix: %+v, want no cached tokens", res.final)
	}
	after := drain(t, mustGenerate(t, m, Request{Prompt: textPrompt, Messages: textMsgs, MaxTokens: 8}))
	if after.final.Usage.CachedTokens != 0 || !slices.Equal(after.tokens, before.tokens) {
		t.Fatalf("text prompt after the image one: cached %d, tokens %v, want 0 and %v",
			after.final.Usage.CachedTokens, after.tokens, before.tokens)
	}
}

// TestVisionRefusesMismatchedImages: the requests a hostile client could
// send once its prompt is tokenized: image tokens and no image, an image
// and no image tokens, more image tokens than images, pixels that do not
// match the size, and n > 1. Each is a 400, and the model answers after.
func TestVisionRefusesMismatchedImages(t *testing.T) {
	m := openVisionModel(t, Options{Slots: 2})
	img := testPNG(t, 16, 16, 3)
	msgs := imageMessages("look", img)
	prompt, err := m.ChatPrompt(msgs, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	text := slices.DeleteFunc(slices.Clone(prompt), func(id int32) bool { return id == backends.ImageToken })
	broken := &backends.Image{Format: "png", Width: 4, Height: 4, RGB: make([]byte, 10)}
	cases := map[string]Request{
		"image tokens, no image":   {Prompt: prompt, Messages: imageMessages("look")},
		"image, no image tokens":   {Prompt: text, Messages: msgs},
		"more tokens than images":  {Prompt: append(slices.Clone(prompt), backends.ImageToken), Messages: msgs},
		"pixels not of their size": {Prompt: prompt, Messages: imageMessages("look", broken)},
		"two choices":              {Prompt: prompt, Messages: msgs, N: 2},
	}
	for name, req := range cases {
		req.MaxTokens = 2
		_, err := m.Generate(context.Background(), req)
		if !errors.Is(err, backends.ErrInvalidRequest) {
			t.Errorf("%s: Generate = %v, want an invalid request", name, err)
		}
	}
	if _, err := m.ChatPrompt(imageMessages("look", broken), nil, true); !errors.Is(err, backends.ErrInvalidRequest) {
		t.Errorf("ChatPrompt of a broken image = %v, want an invalid request", err)
	}
	res := drain(t, mustGenerate(t, m, Request{Prompt: prompt, Messages: msgs, MaxTokens: 3}))
	if res.final.Err != nil || res.final.Usage.CompletionTokens != 3 {
		t.Fatalf("after the refusals: %+v", res.final)
	}
}

// TestTextModelRefusesImageGeneration: a text-only model refuses a
// generation whose messages carry an image with the typed 400 too.
func TestTextModelRefusesImageGeneration(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.SPM), Options{Slots: 1})
	if m.Info().Vision {
		t.Fatal("a model without a projector says Vision")
	}
	msgs := imageMessages("what is this?", testPNG(t, 8, 8, 1))
	text, err := m.ChatPrompt(imageMessages("what is this?"), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	var ie *backends.ImageInputError
	if _, err := m.Generate(context.Background(), Request{Prompt: text, Messages: msgs, MaxTokens: 2}); !errors.As(err, &ie) || ie.Images != 1 {
		t.Fatalf("Generate with an image on a text-only model = %v, want an *ImageInputError", err)
	}
}

// TestProjectorForAnotherModelFailsTheLoad: a projector whose output width
// is not the model's is refused by the library, as a load error.
func TestProjectorForAnotherModelFailsTheLoad(t *testing.T) {
	requireMultimodal(t)
	o := ggufgen.TinyProjector()
	o.TextEmbd = 32
	_, err := Open(genModel(t, ggufgen.Tiny(ggufgen.SPM)), Options{ContextSize: 256, Slots: 1, Projector: genProjector(t, o)})
	if !errors.Is(err, backends.ErrInvalidModel) {
		t.Fatalf("Open with a 32-wide projector for a 64-wide model = %v, want ErrInvalidModel", err)
	}
}

// TestVisionBesideText: an image prompt that joins while a text prompt
// generates (submitted when the text's first token is out), on a model
// that drafts by prompt lookup, leaves the text's greedy tokens as they
// are alone, and its own are those of a model without lookup.
func TestVisionBesideText(t *testing.T) {
	requireMultimodal(t)
	proj := genProjector(t, ggufgen.TinyProjector())
	path := genModel(t, ggufgen.Tiny(ggufgen.SPM))
	open := func(lookup int, h Hooks) *Model {
		m, err := OpenWithHooks(path, Options{ContextSize: 512, Slots: 2, Lookup: lookup, Projector: proj}, h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	textMsgs := imageMessages("count from one to twenty")
	imgMsgs := imageMessages("what is this?", testPNG(t, 50, 40, 77))
	plain := open(0, Hooks{})
	prompt := func(msgs []Message) []int32 {
		p, err := plain.ChatPrompt(msgs, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	textReq := Request{Prompt: prompt(textMsgs), Messages: textMsgs, MaxTokens: 40}
	imgReq := Request{Prompt: prompt(imgMsgs), Messages: imgMsgs, MaxTokens: 20}
	soloText := drain(t, mustGenerate(t, plain, textReq))
	soloImage := drain(t, mustGenerate(t, plain, imgReq))

	// On the scheduler goroutine, after the text's first token: Generate
	// only queues the image request.
	joined := make(chan (<-chan Event), 1)
	var drafting *Model
	var once sync.Once
	drafting = open(4, Hooks{AfterToken: func(slot, n int) {
		once.Do(func() {
			ch, err := drafting.Generate(context.Background(), imgReq)
			if err != nil {
				panic(err)
			}
			joined <- ch
		})
	}})
	text := drain(t, mustGenerate(t, drafting, textReq))
	both := drain(t, <-joined)
	if !slices.Equal(text.tokens, soloText.tokens) {
		t.Fatalf("text beside an image: %v, alone %v", text.tokens, soloText.tokens)
	}
	if both.final.Err != nil || !slices.Equal(both.tokens, soloImage.tokens) {
		t.Fatalf("image beside text, with lookup: %v (%v), alone without lookup %v", both.tokens, both.final.Err, soloImage.tokens)
	}
}
