package pipelines

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/onnx"
	"github.com/modeld/modeld/internal/imagein"
)

// imageGolden is testdata/onnx/goldens/images.json: transformers.js's
// preprocessing and outputs for the test images (patternImage in
// scripts/goldens/pipelines/make-goldens.mjs; testPattern here).
type imageGolden struct {
	Version string `json:"transformers_js"`
	Cases   []struct {
		Model       string    `json:"model"`
		Width       int       `json:"width"`
		Height      int       `json:"height"`
		PixelDims   []int64   `json:"pixel_dims"`
		PixelValues []float64 `json:"pixel_values"`
		Results     []struct {
			Label string  `json:"label"`
			Score float64 `json:"score"`
		} `json:"results"`
		PoolerOutput []float64 `json:"pooler_output"`
		ImageEmbeds  []float64 `json:"image_embeds"`
		CLS          []float64 `json:"cls"`
	} `json:"cases"`
}

// testPattern is the golden script's image, sent through PNG and imagein as
// a client's image would be.
func testPattern(t testing.TB, w, h int) *backends.Image {
	t.Helper()
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			var c [3]uint8
			for ch := range c {
				c[ch] = uint8((x*29 + y*53 + ch*97 + ((x*y)%11)*7) % 256)
			}
			m.SetNRGBA(x, y, color.NRGBA{c[0], c[1], c[2], 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	img, err := imagein.Decode(b.Bytes(), imagein.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestImagePreprocessGoldens: resize, center crop, rescale and normalize equal
// transformers.js's. Images that need no resize (only a crop, or nothing) are
// equal within 1e-6, and so are bilinear resizes by scales on libvips's 1/64
// grid; other resizes are within one 8-bit level of sharp's in under 8% of
// values.
func TestImagePreprocessGoldens(t *testing.T) {
	var g imageGolden
	readGolden(t, "images.json", &g)
	exact, resized := 0, 0
	for _, c := range g.Cases {
		proc, err := readImageProcessor(modelDir(t, c.Model))
		if err != nil {
			t.Fatal(err)
		}
		img := testPattern(t, c.Width, c.Height)
		px, h, w := proc.preprocess(img)
		if want := []int64{1, 3, int64(h), int64(w)}; !equalDims(c.PixelDims, want) {
			t.Fatalf("%s %d×%d: pixel_values %v, transformers.js %v", c.Model, c.Width, c.Height, want, c.PixelDims)
		}
		rw, rh := proc.resizeTo(c.Width, c.Height)
		if !proc.resize || (rw == c.Width && rh == c.Height) {
			if d := maxAbsDiff32(px, c.PixelValues); d > 1e-6 {
				t.Errorf("%s %d×%d: pixel_values differ by %g", c.Model, c.Width, c.Height, d)
			}
			exact++
			continue
		}
		level := 1/255.0/minStd(proc) + 1e-6
		off := 0
		for i := range px {
			d := math.Abs(float64(px[i]) - c.PixelValues[i])
			if d > level {
				t.Fatalf("%s %d×%d: value %d differs by %g, more than one level (%g)", c.Model, c.Width, c.Height, i, d, level)
			}
			if d > 1e-6 {
				off++
			}
		}
		// Bilinear is sharp's to the byte when the inverse scale is on
		// libvips's 1/64 grid; otherwise, and for bicubic, within one level
		// in a few percent of values.
		limit := 0.08
		if proc.resample == 2 && onGrid(c.Width, rw) && onGrid(c.Height, rh) {
			limit = 0
		}
		if frac := float64(off) / float64(len(px)); frac > limit {
			t.Errorf("%s %d×%d: %d of %d values differ by one level", c.Model, c.Width, c.Height, off, len(px))
		} else {
			t.Logf("%s %d×%d -> %d×%d (resampled): %d of %d values one level off sharp's", c.Model, c.Width, c.Height, w, h, off, len(px))
		}
		resized++
	}
	if exact < 6 || resized < 8 {
		t.Fatalf("only %d exact and %d resized cases in the golden", exact, resized)
	}
}

// onGrid reports whether in/out is a multiple of 1/64.
func onGrid(in, out int) bool { return (in*64)%out == 0 }

func minStd(p *imageProcessor) float64 {
	if !p.normalize {
		return 1
	}
	return math.Min(p.std[0], math.Min(p.std[1], p.std[2]))
}

func equalDims(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestImagePipelineGoldens: the ViT classifier's probabilities and the ViT
// encoder's pooled vectors equal transformers.js's within 1e-5, on
// transformers.js's own pixel_values (model parity) and end to end where the
// preprocessing is exact.
func TestImagePipelineGoldens(t *testing.T) {
	var g imageGolden
	readGolden(t, "images.json", &g)
	opts := testOptions(t)
	cls, err := LoadImageClassifier(modelDir(t, "vit-classify"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, cls)
	emb, err := LoadImageEmbedder(modelDir(t, "vit-embed"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, emb)
	if emb.output != "pooler_output" || emb.Dimensions() != 32 {
		t.Fatalf("embedder output %s dim %d", emb.output, emb.Dimensions())
	}
	clip, err := LoadImageEmbedder(modelDir(t, "clip-vision"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, clip)
	if clip.output != "image_embeds" || clip.Dimensions() != 16 {
		t.Fatalf("clip embedder output %s dim %d", clip.output, clip.Dimensions())
	}
	ctx := context.Background()
	compared := 0
	for _, c := range g.Cases {
		pv := make([]float32, len(c.PixelValues))
		for i, v := range c.PixelValues {
			pv[i] = float32(v)
		}
		var m *imageModel
		var name string
		var want []float64
		e := emb
		switch c.Model {
		case "vit-classify":
			m, name = cls.m, "logits"
		case "clip-vision":
			m, name, want, e = clip.m, "image_embeds", c.ImageEmbeds, clip
		default:
			m, name, want = emb.m, "pooler_output", c.PoolerOutput
		}
		res, err := m.sess.Run(ctx, map[string]*onnx.Tensor{"pixel_values": onnx.NewFloat32(pv, c.PixelDims...)})
		if err != nil {
			t.Fatal(err)
		}
		got := res[name].F32
		img := testPattern(t, c.Width, c.Height)
		rw, rh := m.proc.resizeTo(c.Width, c.Height)
		exactPre := !m.proc.resize || (rw == c.Width && rh == c.Height)
		if c.Model == "vit-classify" {
			probs := softmax(got)
			for _, r := range c.Results {
				i := indexOfLabel(cls.Labels(), r.Label)
				if d := math.Abs(probs[i] - r.Score); d > 1e-5 {
					t.Errorf("%d×%d: %s probability %g, transformers.js %g", c.Width, c.Height, r.Label, probs[i], r.Score)
				}
			}
			out, err := cls.ClassifyImages(ctx, []*backends.Image{img}, ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if exactPre {
				for k, r := range c.Results {
					if l := out.Results[0][k]; l.Label != r.Label || math.Abs(l.Score-r.Score) > 1e-5 {
						t.Errorf("%d×%d: rank %d %s %g, transformers.js %s %g", c.Width, c.Height, k, l.Label, l.Score, r.Label, r.Score)
					}
				}
			}
		} else {
			if d := maxAbsDiff32(got, want); d > 1e-5 {
				t.Errorf("%s %d×%d: %s differs by %g", c.Model, c.Width, c.Height, name, d)
			}
			out, err := e.EmbedImages(ctx, []*backends.Image{img}, EmbedOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if exactPre {
				if d := maxAbsDiff32(out.Vectors[0], want); d > 1e-5 {
					t.Errorf("%d×%d: vector differs by %g end to end", c.Width, c.Height, d)
				}
			}
		}
		compared++
	}
	t.Logf("%d image cases equal to transformers.js %s", compared, g.Version)
}

func indexOfLabel(labels []string, l string) int {
	for i, x := range labels {
		if x == l {
			return i
		}
	}
	return -1
}

// TestImageBatchEqualsSingle: images run together give each image's vector alone.
func TestImageBatchEqualsSingle(t *testing.T) {
	emb, err := LoadImageEmbedder(modelDir(t, "vit-embed"), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, emb)
	ctx := context.Background()
	var imgs []*backends.Image
	for i := 0; i < 20; i++ {
		imgs = append(imgs, testPattern(t, 30+i, 40))
	}
	all, err := emb.EmbedImages(ctx, imgs, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, img := range imgs {
		one, err := emb.EmbedImages(ctx, []*backends.Image{img}, EmbedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, len(one.Vectors[0]))
		for j, v := range one.Vectors[0] {
			want[j] = float64(v)
		}
		if d := maxAbsDiff32(all.Vectors[i], want); d > 1e-5 {
			t.Fatalf("image %d: batched vector differs by %g", i, d)
		}
	}
	n := true
	res, err := emb.EmbedImages(ctx, imgs[:1], EmbedOptions{Normalize: &n, Dimensions: 8})
	if err != nil || len(res.Vectors[0]) != 8 {
		t.Fatalf("dimensions 8: %v", err)
	}
	var sum float64
	for _, v := range res.Vectors[0] {
		sum += float64(v) * float64(v)
	}
	if math.Abs(sum-1) > 1e-5 {
		t.Fatalf("normalized vector has norm² %g", sum)
	}
}

// TestImageModelRefusals: wrong inputs and wrong folders are clear errors.
func TestImageModelRefusals(t *testing.T) {
	opts := testOptions(t)
	emb, err := LoadImageEmbedder(modelDir(t, "vit-embed"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, emb)
	ctx := context.Background()
	for name, imgs := range map[string][]*backends.Image{
		"nil image":  {nil},
		"short RGB":  {{Width: 4, Height: 4, RGB: make([]byte, 10)}},
		"zero width": {{Width: 0, Height: 4}},
		"none":       {},
		"too many":   make([]*backends.Image, backends.MaxImageInputs+1),
	} {
		if _, err := emb.EmbedImages(ctx, imgs, EmbedOptions{}); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: %v, want invalid input", name, err)
		}
	}
	if _, err := emb.EmbedImages(ctx, []*backends.Image{testPattern(t, 4, 4)}, EmbedOptions{Pooling: PoolingMean}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("pooling: %v", err)
	}
	// A text model is not an image model, and an image model is not a text one.
	if _, err := LoadImageClassifier(modelDir(t, "classify"), opts); !errors.Is(err, ErrWrongModel) {
		t.Errorf("text classifier as image classifier: %v", err)
	}
	if _, err := LoadClassifier(modelDir(t, "vit-classify"), opts); err == nil {
		t.Error("image classifier loaded as a text classifier")
	}
	// preprocessor options modeld does not implement are refused, not ignored.
	dir := t.TempDir()
	for _, f := range []string{"config.json", "onnx/model.onnx"} {
		b, err := os.ReadFile(filepath.Join(modelDir(t, "vit-embed"), f))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "preprocessor_config.json"), []byte(`{"size":{"height":32,"width":32},"do_pad":true,"resample":1}`), 0o644)
	_, err = LoadImageEmbedder(dir, opts)
	if !errors.Is(err, ErrWrongModel) || !bytes.Contains([]byte(err.Error()), []byte("do_pad")) || !bytes.Contains([]byte(err.Error()), []byte("resample 1")) {
		t.Errorf("unsupported preprocessing: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "preprocessor_config.json"), []byte(`{"size":{"height":48,"width":48}}`), 0o644)
	if _, err = LoadImageEmbedder(dir, opts); !errors.Is(err, ErrWrongModel) {
		t.Errorf("a 48×48 processor on a 32×32 model: %v", err)
	}
}
