package pipelines

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/modeld/modeld/backends"
)

// The embedding option and result types are backends'.
type (
	Pooling      = backends.Pooling
	EmbedOptions = backends.EmbedOptions
	EmbedResult  = backends.EmbedResult
)

// Poolings. The default for a model without a sentence-transformers pooling config
// is PoolingMean.
const (
	PoolingMean      = backends.PoolingMean
	PoolingCLS       = backends.PoolingCLS
	PoolingLastToken = backends.PoolingLastToken
)

// ParsePooling accepts mean, cls (or first_token) and last_token (or eos), the
// names transformers.js uses; "" means the model's default.
func ParsePooling(s string) (Pooling, error) { return backends.ParsePooling(s) }

// Embedder is a feature-extraction pipeline.
type Embedder struct {
	enc       *encoderModel
	pooling   Pooling
	normalize bool
	dim       int
}

// LoadEmbedder loads a feature-extraction model folder (onnx/model.onnx with a
// last_hidden_state output). Pooling and normalization defaults come from the
// sentence-transformers files when present: modules.json (its Pooling module's
// config.json, and a Normalize module) or 1_Pooling/config.json.
func LoadEmbedder(dir string, opts Options) (*Embedder, error) {
	files, err := loadFiles(dir)
	if err != nil {
		return nil, err
	}
	pooling, normalize, err := readPooling(dir)
	if err != nil {
		return nil, err
	}
	enc, err := loadEncoder(files, "last_hidden_state", "feature-extraction", opts)
	if err != nil {
		return nil, err
	}
	dim := 0 // unknown when the model leaves the hidden size symbolic
	for _, o := range enc.sess.Outputs() {
		if o.Name == "last_hidden_state" && len(o.Shape) == 3 && o.Shape[2] > 0 {
			dim = int(o.Shape[2])
		}
	}
	return &Embedder{enc: enc, pooling: pooling, normalize: normalize, dim: dim}, nil
}

// Embed returns one vector per text. Texts longer than the model's maximum length
// are truncated (Truncated counts them), not refused.
func (e *Embedder) Embed(ctx context.Context, texts []string, opts EmbedOptions) (EmbedResult, error) {
	if err := checkTexts(texts); err != nil {
		return EmbedResult{}, err
	}
	if err := checkCount("input texts", len(texts), MaxEmbedInputs); err != nil {
		return EmbedResult{}, err
	}
	pooling := opts.Pooling
	if pooling == "" {
		pooling = e.pooling
	}
	if _, err := ParsePooling(string(pooling)); err != nil {
		return EmbedResult{}, err
	}
	normalize := e.normalize
	if opts.Normalize != nil {
		normalize = *opts.Normalize
	}
	if opts.Dimensions < 0 || (e.dim > 0 && opts.Dimensions > e.dim) {
		return EmbedResult{}, fmt.Errorf("pipelines: dimensions %d out of range 1..%d: %w", opts.Dimensions, e.dim, ErrInvalidInput)
	}
	if opts.Dimensions > 0 && opts.Normalize == nil {
		normalize = true
	}
	encs, usage, err := e.enc.preprocess(ctx, texts)
	if err != nil {
		return EmbedResult{}, err
	}
	outs, err := e.enc.forward(ctx, encs)
	if err != nil {
		return EmbedResult{}, err
	}
	res := EmbedResult{Vectors: make([][]float32, len(outs)), Tokens: usage.tokens, Truncated: usage.truncated, Device: e.Device()}
	for i, o := range outs {
		v := pool(o, pooling)
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

// pool reduces one sequence's token vectors to a new vector.
func pool(o seqOut, p Pooling) []float32 {
	v := make([]float32, o.Cols)
	switch p {
	case PoolingCLS:
		copy(v, o.Data[:o.Cols])
	case PoolingLastToken:
		last := o.Rows - 1
		for last > 0 && o.Mask != nil && o.Mask[last] == 0 {
			last--
		}
		copy(v, o.Data[last*o.Cols:(last+1)*o.Cols])
	default: // mean over attended tokens, summed in float64 as transformers.js does
		sum := make([]float64, o.Cols)
		count := 0.0
		for r := 0; r < o.Rows; r++ {
			if o.Mask != nil && o.Mask[r] == 0 {
				continue
			}
			count++
			row := o.Data[r*o.Cols : (r+1)*o.Cols]
			for j, x := range row {
				sum[j] += float64(x)
			}
		}
		for j := range v {
			v[j] = float32(sum[j] / max(count, 1))
		}
	}
	return v
}

func checkTexts(texts []string) error {
	if len(texts) == 0 {
		return fmt.Errorf("pipelines: no input texts: %w", ErrInvalidInput)
	}
	var errs []error
	for i, t := range texts {
		if t == "" {
			errs = append(errs, fmt.Errorf("input %d is empty", i))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("pipelines: %w: %w", ErrInvalidInput, errors.Join(errs...))
	}
	return nil
}

// Dimensions is the length of the model's vectors (0 when the model does not say).
func (e *Embedder) Dimensions() int { return e.dim }

// DefaultPooling is the pooling used when EmbedOptions.Pooling is empty.
func (e *Embedder) DefaultPooling() Pooling { return e.pooling }

// DefaultNormalize says whether vectors are L2-normalized when
// EmbedOptions.Normalize is nil.
func (e *Embedder) DefaultNormalize() bool { return e.normalize }

// Device is where the model runs: "cpu" or "cuda:N".
func (e *Embedder) Device() string { return e.enc.sess.Device() }

// FallbackReason says why a pipeline asked to use the GPU runs on CPU.
func (e *Embedder) FallbackReason() string { return e.enc.sess.FallbackReason() }

// Size is the total size of the model folder's files in bytes.
func (e *Embedder) Size() int64 { return e.enc.files.size }

// Task is TaskEmbed.
func (e *Embedder) Task() Task { return TaskEmbed }

// Close releases the model.
func (e *Embedder) Close() error { return e.enc.close() }

// readPooling reads the sentence-transformers pooling settings of a model folder.
func readPooling(dir string) (Pooling, bool, error) {
	poolDir := filepath.Join(dir, "1_Pooling")
	normalize := false
	var modules []struct {
		Path string `json:"path"`
		Type string `json:"type"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "modules.json"))
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &modules); err != nil {
			return "", false, fmt.Errorf("pipelines: %s/modules.json: %w", dir, err)
		}
		for _, m := range modules {
			switch {
			case strings.HasSuffix(m.Type, ".Pooling"):
				poolDir = filepath.Join(dir, m.Path)
			case strings.HasSuffix(m.Type, ".Normalize"):
				normalize = true
			}
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, fmt.Errorf("pipelines: %w", err)
	}
	b, err = os.ReadFile(filepath.Join(poolDir, "config.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return PoolingMean, normalize, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("pipelines: %w", err)
	}
	var pc map[string]any
	if err := json.Unmarshal(b, &pc); err != nil {
		return "", false, fmt.Errorf("pipelines: %s: %w", filepath.Join(poolDir, "config.json"), err)
	}
	var modes []string
	for k, v := range pc {
		if on, _ := v.(bool); on && strings.HasPrefix(k, "pooling_mode_") {
			modes = append(modes, strings.TrimPrefix(k, "pooling_mode_"))
		}
	}
	if len(modes) != 1 {
		return "", false, fmt.Errorf("pipelines: %s: pooling modes %v: exactly one of cls_token, mean_tokens, lasttoken is supported: %w", poolDir, modes, ErrWrongModel)
	}
	switch modes[0] {
	case "cls_token":
		return PoolingCLS, normalize, nil
	case "mean_tokens":
		return PoolingMean, normalize, nil
	case "lasttoken":
		return PoolingLastToken, normalize, nil
	}
	return "", false, fmt.Errorf("pipelines: %s: pooling mode %s is not supported: %w", poolDir, modes[0], ErrWrongModel)
}
