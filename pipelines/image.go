package pipelines

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/onnx"
)

// The image tasks, as backends names them.
const (
	TaskImageClassify Task = backends.TaskImageClassify
	TaskImageEmbed    Task = backends.TaskImageEmbed
)

// imageRunRows bounds the images of one session run.
const imageRunRows = 16

// imageModel is an image encoder (onnx/model.onnx with a pixel_values input)
// and its preprocessor_config.json. Images are preprocessed in Go, as
// transformers.js's ImageProcessor does, and run in groups of imageRunRows.
type imageModel struct {
	dir    string
	config modelConfig
	proc   *imageProcessor
	sess   *onnx.Session
	size   int64
}

// loadImageModel opens dir/onnx/file (the first of files present) as an
// image model for task with one of outputs.
func loadImageModel(dir, task string, files []string, opts Options, outputs ...string) (*imageModel, error) {
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("pipelines: model folder: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("pipelines: %s is not a model folder", dir)
	}
	cfg, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	proc, err := readImageProcessor(dir)
	if err != nil {
		return nil, err
	}
	size, err := dirSize(dir)
	if err != nil {
		return nil, err
	}
	mf := &modelFiles{dir: dir, config: cfg}
	name := files[len(files)-1]
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, "onnx", f)); err == nil {
			name = f
			break
		}
	}
	path, err := mf.onnxPath(name, task)
	if err != nil {
		return nil, err
	}
	sess, err := opts.session(path)
	if err != nil {
		return nil, fmt.Errorf("pipelines: %w", err)
	}
	m := &imageModel{dir: dir, config: cfg, proc: proc, sess: sess, size: size}
	if err := m.check(task, outputs); err != nil {
		return nil, closeAfter(sess, err)
	}
	return m, nil
}

func (m *imageModel) check(task string, outputs []string) error {
	ins := m.sess.Inputs()
	if len(ins) != 1 || ins[0].Name != "pixel_values" || ins[0].Type != onnx.Float32 {
		return fmt.Errorf("pipelines: %s: an %s model has one float32 input pixel_values: %w", m.dir, task, ErrWrongModel)
	}
	if s := ins[0].Shape; len(s) != 4 || (s[1] > 0 && s[1] != 3) {
		return fmt.Errorf("pipelines: %s: pixel_values has shape %v, want [batch, 3, height, width]: %w", m.dir, s, ErrWrongModel)
	} else if (s[2] > 0 && m.proc.outHeight > 0 && s[2] != int64(m.proc.outHeight)) || (s[3] > 0 && m.proc.outWidth > 0 && s[3] != int64(m.proc.outWidth)) {
		return fmt.Errorf("pipelines: %s: the model takes %d×%d images, preprocessor_config.json makes %d×%d: %w",
			m.dir, s[3], s[2], m.proc.outWidth, m.proc.outHeight, ErrWrongModel)
	}
	for _, o := range outputs {
		if m.output(o) != nil {
			return nil
		}
	}
	return fmt.Errorf("pipelines: %s has none of the outputs %v an %s model needs: %w", m.dir, outputs, task, ErrWrongModel)
}

// output returns the session's output named name, or nil.
func (m *imageModel) output(name string) *onnx.TensorInfo {
	for _, o := range m.sess.Outputs() {
		if o.Name == name {
			return &o
		}
	}
	return nil
}

// checkImages validates a call's images.
func checkImages(images []*backends.Image) error {
	if len(images) == 0 {
		return fmt.Errorf("pipelines: no input images: %w", ErrInvalidInput)
	}
	if err := checkCount("input images", len(images), backends.MaxImageInputs); err != nil {
		return err
	}
	var errs []error
	for i, img := range images {
		if img == nil || img.Width < 1 || img.Height < 1 || len(img.RGB) != img.Width*img.Height*3 {
			errs = append(errs, fmt.Errorf("input image %d is not a decoded RGB image", i))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("pipelines: %w: %w", errors.Join(errs...), ErrInvalidInput)
	}
	return nil
}

// forward preprocesses images and returns output name's rows, one per image.
func (m *imageModel) forward(ctx context.Context, images []*backends.Image, name string) ([][]float32, error) {
	out := make([][]float32, 0, len(images))
	for start := 0; start < len(images); {
		// A group shares one tensor, so its images must preprocess to one size.
		px, h, w := m.proc.preprocess(images[start])
		data := px
		end := start + 1
		for end < len(images) && end-start < imageRunRows && m.proc.outHeight > 0 {
			p, _, _ := m.proc.preprocess(images[end])
			data = append(data, p...)
			end++
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := end - start
		res, err := m.sess.Run(ctx, map[string]*onnx.Tensor{"pixel_values": onnx.NewFloat32(data, int64(n), 3, int64(h), int64(w))})
		if err != nil {
			return nil, fmt.Errorf("pipelines: %w", err)
		}
		t, ok := res[name]
		if !ok || len(t.Shape) < 2 || t.Shape[0] != int64(n) {
			return nil, fmt.Errorf("pipelines: %s: output %s missing or not [batch, ...]", m.dir, name)
		}
		row := len(t.F32) / n
		for i := 0; i < n; i++ {
			out = append(out, t.F32[i*row:(i+1)*row])
		}
		start = end
	}
	return out, nil
}

func (m *imageModel) info(task Task) backends.Info {
	return backends.Info{
		Backend: Backend, Path: m.dir, Arch: m.config.ModelType, Task: string(task),
		Slots: MaxInFlight, Device: m.sess.Device(), GPUFallback: m.sess.FallbackReason(),
	}
}

// ImageClassifier is an image-classification pipeline (ViTForImageClassification
// and the like: a logits output and id2label). Scores are softmax by default,
// as transformers.js's image-classification pipeline computes them.
type ImageClassifier struct {
	m      *imageModel
	labels []string
}

// LoadImageClassifier loads an image-classification model folder.
func LoadImageClassifier(dir string, opts Options) (*ImageClassifier, error) {
	m, err := loadImageModel(dir, "image-classification", []string{"model.onnx"}, opts, "logits")
	if err != nil {
		return nil, err
	}
	o := m.output("logits")
	if len(o.Shape) != 2 || o.Shape[1] <= 0 {
		return nil, closeAfter(m.sess, fmt.Errorf("pipelines: %s: logits shape %v is not [batch, labels]: %w", dir, o.Shape, ErrWrongModel))
	}
	return &ImageClassifier{m: m, labels: m.config.labels(int(o.Shape[1]))}, nil
}

// ClassifyImages scores each image against the model's labels.
func (c *ImageClassifier) ClassifyImages(ctx context.Context, images []*backends.Image, opts ClassifyOptions) (ClassifyResult, error) {
	if err := checkImages(images); err != nil {
		return ClassifyResult{}, err
	}
	fn, err := ParseScoring(string(opts.Function))
	if err != nil {
		return ClassifyResult{}, err
	}
	if fn == "" {
		fn = ScoringSoftmax
	}
	rows, err := c.m.forward(ctx, images, "logits")
	if err != nil {
		return ClassifyResult{}, err
	}
	res := ClassifyResult{Results: make([][]LabelScore, len(rows)), Device: c.Device()}
	for i, r := range rows {
		res.Results[i] = topK(score(r, fn), c.labels, opts.TopK)
	}
	return res, nil
}

// Labels are the model's labels by output index.
func (c *ImageClassifier) Labels() []string { return c.labels }

// Info describes the loaded model.
func (c *ImageClassifier) Info() backends.Info { return c.m.info(TaskImageClassify) }

// Device is where the model runs.
func (c *ImageClassifier) Device() string { return c.m.sess.Device() }

// FallbackReason says why a GPU request runs on the CPU ("" if not).
func (c *ImageClassifier) FallbackReason() string { return c.m.sess.FallbackReason() }

// Size is the bytes of the model folder.
func (c *ImageClassifier) Size() int64 { return c.m.size }

// Task is TaskImageClassify.
func (c *ImageClassifier) Task() Task { return TaskImageClassify }

// Close frees the session.
func (c *ImageClassifier) Close() error { return c.m.sess.Close() }

// ImageEmbedder is an image feature-extraction pipeline. The vector is the
// model's image_embeds (a CLIP-style vision tower with projection), else its
// pooler_output (ViTModel), else the first token of last_hidden_state.
type ImageEmbedder struct {
	m      *imageModel
	output string
	dim    int
}

// LoadImageEmbedder loads an image encoder folder: onnx/vision_model.onnx
// (a CLIP-style vision tower) when present, else onnx/model.onnx.
func LoadImageEmbedder(dir string, opts Options) (*ImageEmbedder, error) {
	outs := []string{"image_embeds", "pooler_output", "last_hidden_state"}
	// A CLIP-style folder's image tower is onnx/vision_model.onnx (its
	// model.onnx, when there is one, is the text and image graph together).
	m, err := loadImageModel(dir, "image-feature-extraction", []string{"vision_model.onnx", "model.onnx"}, opts, outs...)
	if err != nil {
		return nil, err
	}
	e := &ImageEmbedder{m: m}
	for _, name := range outs {
		if o := m.output(name); o != nil {
			e.output = name
			if len(o.Shape) > 1 && o.Shape[len(o.Shape)-1] > 0 {
				e.dim = int(o.Shape[len(o.Shape)-1])
			}
			break
		}
	}
	if e.output == "last_hidden_state" && e.dim == 0 {
		return nil, closeAfter(m.sess, fmt.Errorf("pipelines: %s: last_hidden_state has no fixed hidden size: %w", dir, ErrWrongModel))
	}
	return e, nil
}

// EmbedImages returns one vector per image. Pooling does not apply; the
// vectors are not normalized unless asked (Normalize, or Dimensions).
func (e *ImageEmbedder) EmbedImages(ctx context.Context, images []*backends.Image, opts EmbedOptions) (EmbedResult, error) {
	if err := checkImages(images); err != nil {
		return EmbedResult{}, err
	}
	if opts.Pooling != "" {
		return EmbedResult{}, fmt.Errorf("pipelines: pooling does not apply to an image model (its %s is the vector): %w", e.output, ErrInvalidInput)
	}
	if opts.Dimensions < 0 || (e.dim > 0 && opts.Dimensions > e.dim) {
		return EmbedResult{}, fmt.Errorf("pipelines: dimensions %d out of range 1..%d: %w", opts.Dimensions, e.dim, ErrInvalidInput)
	}
	normalize := opts.Dimensions > 0
	if opts.Normalize != nil {
		normalize = *opts.Normalize
	}
	rows, err := e.m.forward(ctx, images, e.output)
	if err != nil {
		return EmbedResult{}, err
	}
	res := EmbedResult{Vectors: make([][]float32, len(rows)), Device: e.Device()}
	for i, r := range rows {
		if e.output == "last_hidden_state" {
			r = r[:e.dim] // the first token's vector
		}
		v := append([]float32(nil), r...)
		if opts.Dimensions > 0 {
			v = v[:opts.Dimensions]
		}
		if normalize {
			l2Normalize(v)
		}
		res.Vectors[i] = v
	}
	return res, nil
}

// Dimensions is the vectors' length (0 when the model does not say).
func (e *ImageEmbedder) Dimensions() int { return e.dim }

// Info describes the loaded model.
func (e *ImageEmbedder) Info() backends.Info { return e.m.info(TaskImageEmbed) }

// Device is where the model runs.
func (e *ImageEmbedder) Device() string { return e.m.sess.Device() }

// FallbackReason says why a GPU request runs on the CPU ("" if not).
func (e *ImageEmbedder) FallbackReason() string { return e.m.sess.FallbackReason() }

// Size is the bytes of the model folder.
func (e *ImageEmbedder) Size() int64 { return e.m.size }

// Task is TaskImageEmbed.
func (e *ImageEmbedder) Task() Task { return TaskImageEmbed }

// Close frees the session.
func (e *ImageEmbedder) Close() error { return e.m.sess.Close() }

var (
	_ Pipeline                 = (*ImageClassifier)(nil)
	_ Pipeline                 = (*ImageEmbedder)(nil)
	_ backends.ImageClassifier = (*ImageClassifier)(nil)
	_ backends.ImageEmbedder   = (*ImageEmbedder)(nil)
)
