package ggufgen

import (
	"errors"
	"fmt"
	"io"
	"math"
)

// ProjectorOptions describe a generated multimodal projector (mmproj) GGUF:
// a tiny ViT vision encoder with a two-layer MLP projector (llama.cpp's
// "mlp" projector type, the LLaVA shape), random weights. Its output width
// is TextEmbd, which must equal the chat model's embedding width (Options.Embd)
// for llama.cpp's multimodal library to pair them. Zero fields take the
// defaults of TinyProjector.
type ProjectorOptions struct {
	// TextEmbd is the projector's output width: the chat model's Embd
	// (default 64, Tiny's).
	TextEmbd int
	// ImageSize is the square input side in pixels and PatchSize the
	// patch side (defaults 32 and 8): an image becomes
	// (ImageSize/PatchSize)² tokens (16 by default).
	ImageSize, PatchSize int
	Embd                 int // the encoder's width (default 32)
	FF                   int // its feed-forward width (default 2*Embd; must differ from Embd)
	Layers               int // encoder blocks (default 2; llama.cpp reads all but the last)
	Heads                int // attention heads (default 4)
	Hidden               int // the projector MLP's inner width (default 2*TextEmbd)
	Seed                 uint64
	Name                 string // general.name (default "modeld-test-mmproj")
}

// TinyProjector is the projector of Tiny's models: 32 px images of 8 px
// patches, 16 image tokens, 64-wide output, under 100 KB.
func TinyProjector() ProjectorOptions { return ProjectorOptions{}.withDefaults() }

func (o ProjectorOptions) withDefaults() ProjectorOptions {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.TextEmbd, 64)
	def(&o.ImageSize, 32)
	def(&o.PatchSize, 8)
	def(&o.Embd, 32)
	def(&o.FF, 2*o.Embd)
	def(&o.Layers, 2)
	def(&o.Heads, 4)
	def(&o.Hidden, 2*o.TextEmbd)
	if o.Name == "" {
		o.Name = "modeld-test-mmproj"
	}
	return o
}

// ImageTokens is how many tokens one image becomes.
func (o ProjectorOptions) ImageTokens() int {
	o = o.withDefaults()
	side := o.ImageSize / o.PatchSize
	return side * side
}

func (o ProjectorOptions) validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{{"TextEmbd", o.TextEmbd}, {"ImageSize", o.ImageSize}, {"PatchSize", o.PatchSize}, {"Embd", o.Embd},
		{"FF", o.FF}, {"Layers", o.Layers}, {"Heads", o.Heads}, {"Hidden", o.Hidden}} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("%s %d is below 1", f.name, f.v))
		}
	}
	if o.PatchSize > 0 && o.ImageSize%o.PatchSize != 0 {
		errs = append(errs, fmt.Errorf("image size %d is not a multiple of the patch size %d", o.ImageSize, o.PatchSize))
	}
	if o.Heads > 0 && o.Embd%o.Heads != 0 {
		errs = append(errs, fmt.Errorf("width %d is not a multiple of the heads %d", o.Embd, o.Heads))
	}
	// llama.cpp takes an ffn_down whose input width is the encoder's for
	// an old export with up and down swapped.
	if o.FF == o.Embd {
		errs = append(errs, fmt.Errorf("FF %d must differ from Embd", o.FF))
	}
	if o.Layers < 2 {
		errs = append(errs, errors.New("the encoder needs two layers at least (the last one is not read)"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ggufgen: projector: %w", err)
	}
	return nil
}

// WriteProjectorFile writes the projector described by o to path.
func WriteProjectorFile(path string, o ProjectorOptions) error {
	return writeFile(path, func(w io.Writer) error { return WriteProjector(w, o) })
}

// WriteProjector writes the projector described by o to w; the same
// options always give the same bytes.
func WriteProjector(w io.Writer, o ProjectorOptions) error {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return err
	}
	return writeGGUF(w, projectorKVs(o), projectorTensors(o))
}

func projectorKVs(o ProjectorOptions) []kv {
	return []kv{
		{"general.architecture", "clip"},
		{"general.name", o.Name},
		{"general.file_type", uint32(0)},
		{"clip.projector_type", "mlp"},
		{"clip.has_vision_encoder", true},
		{"clip.use_gelu", true},
		{"clip.vision.image_size", uint32(o.ImageSize)},
		{"clip.vision.patch_size", uint32(o.PatchSize)},
		{"clip.vision.embedding_length", uint32(o.Embd)},
		{"clip.vision.feed_forward_length", uint32(o.FF)},
		{"clip.vision.block_count", uint32(o.Layers)},
		{"clip.vision.projection_dim", uint32(o.TextEmbd)},
		{"clip.vision.attention.head_count", uint32(o.Heads)},
		{"clip.vision.attention.layer_norm_epsilon", float32(1e-5)},
		{"clip.vision.image_mean", []float32{0.5, 0.5, 0.5}},
		{"clip.vision.image_std", []float32{0.5, 0.5, 0.5}},
	}
}

// projectorTensors are the encoder's and the projector's tensors, all F32:
// the patch convolution and positions, pre-norm blocks with biases, and
// the MLP mm.0 -> GELU -> mm.2 to the text width.
func projectorTensors(o ProjectorOptions) []*tensor {
	e, ff, h, te := uint64(o.Embd), uint64(o.FF), uint64(o.Hidden), uint64(o.TextEmbd)
	p := uint64(o.PatchSize)
	side := uint64(o.ImageSize / o.PatchSize)
	rnd := func(name string, std float64) func([]float32) {
		return func(dst []float32) { uniform(dst, o.Seed, name, std) }
	}
	fill := func(v float32) func([]float32) {
		return func(dst []float32) {
			for i := range dst {
				dst[i] = v
			}
		}
	}
	t := func(name string, fn func([]float32), dims ...uint64) *tensor {
		return &tensor{name: name, dims: dims, typ: ggmlF32, fill: fn}
	}
	inv := func(n uint64) float64 { return 1 / math.Sqrt(float64(n)) }
	ts := []*tensor{
		// ggml's conv2d kernel: [kernel w, kernel h, in channels, out channels].
		t("v.patch_embd.weight", rnd("v.patch_embd.weight", inv(3*p*p)), p, p, 3, e),
		t("v.patch_embd.bias", fill(0), e),
		t("v.position_embd.weight", rnd("v.position_embd.weight", 0.5), e, side*side),
	}
	for l := 0; l < o.Layers; l++ {
		b := fmt.Sprintf("v.blk.%d.", l)
		ts = append(ts,
			t(b+"ln1.weight", fill(1), e), t(b+"ln1.bias", fill(0), e),
			t(b+"attn_q.weight", rnd(b+"attn_q.weight", inv(e)), e, e), t(b+"attn_q.bias", fill(0), e),
			t(b+"attn_k.weight", rnd(b+"attn_k.weight", inv(e)), e, e), t(b+"attn_k.bias", fill(0), e),
			t(b+"attn_v.weight", rnd(b+"attn_v.weight", inv(e)), e, e), t(b+"attn_v.bias", fill(0), e),
			t(b+"attn_out.weight", rnd(b+"attn_out.weight", inv(e)), e, e), t(b+"attn_out.bias", fill(0), e),
			t(b+"ln2.weight", fill(1), e), t(b+"ln2.bias", fill(0), e),
			t(b+"ffn_up.weight", rnd(b+"ffn_up.weight", inv(e)), e, ff), t(b+"ffn_up.bias", fill(0), ff),
			t(b+"ffn_down.weight", rnd(b+"ffn_down.weight", inv(ff)), ff, e), t(b+"ffn_down.bias", fill(0), e),
		)
	}
	return append(ts,
		t("mm.0.weight", rnd("mm.0.weight", inv(e)), e, h), t("mm.0.bias", fill(0), h),
		t("mm.2.weight", rnd("mm.2.weight", inv(h)), h, te), t("mm.2.bias", fill(0), te),
	)
}
