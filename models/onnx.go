package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
)

// Files of a Hugging Face-style ONNX folder.
const (
	onnxConfig          = "config.json"
	onnxTokenizer       = "tokenizer.json"
	onnxTokenizerConfig = "tokenizer_config.json"
	onnxPreprocessor    = "preprocessor_config.json" // an image model's, instead of a tokenizer
	onnxDir             = "onnx/"
)

// Bounds on the JSON files of an ONNX folder, which are untrusted input: real
// tokenizer.json files are up to ~35 MB, the others a few KB (config.json up
// to ~100 KB with a large id2label). Nesting is bounded by encoding/json
// (10000 levels).
const (
	maxTokenizerJSONBytes = 128 << 20
	maxConfigJSONBytes    = 16 << 20
)

// maxJSONBytes is the bound for the JSON file at path p in the model.
func maxJSONBytes(p string) int64 {
	if p == onnxTokenizer {
		return maxTokenizerJSONBytes
	}
	return maxConfigJSONBytes
}

// readConfigJSON reads the config.json at path, refusing one larger than
// maxConfigJSONBytes without reading it.
func readConfigJSON(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	b, err := io.ReadAll(io.LimitReader(f, maxConfigJSONBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigJSONBytes {
		return nil, fmt.Errorf("%w: %s is more than %d bytes, too large for a model config", ErrInvalidModel, onnxConfig, maxConfigJSONBytes)
	}
	return b, nil
}

// checkJSONFile checks that r (size bytes), the file at path p of the model,
// holds one valid JSON value within its size bound.
func checkJSONFile(r io.Reader, size int64, p string) error {
	limit := maxJSONBytes(p)
	if size > limit {
		return fmt.Errorf("%w: %s is %d bytes, more than the %d a model's %s may have", ErrInvalidModel, p, size, limit, path.Base(p))
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	if int64(len(b)) > limit {
		return fmt.Errorf("%w: %s is more than %d bytes", ErrInvalidModel, p, limit)
	}
	var v json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("%w: %s is not valid JSON: %w", ErrInvalidModel, p, err)
	}
	return nil
}

// onnxOptionalFiles are copied or fetched when present.
var onnxOptionalFiles = []string{
	"generation_config.json",
	"special_tokens_map.json",
	"modules.json",
	"sentence_bert_config.json",
	"1_Pooling/config.json",
}

// onnxPlan is what an ONNX folder or repository contributes to a manifest.
type onnxPlan struct {
	files []string // paths inside the model, required first
	info  ONNXInfo
	tasks []Task
}

// planONNX decides which files of an ONNX folder (paths: every file in it,
// '/'-separated) make the model, validates that the task has what it needs,
// and infers or checks the tasks. variant selects onnx/model_<variant>.onnx
// ("" = onnx/model.onnx, or the only variant present); task "" means infer.
func planONNX(paths []string, configJSON []byte, variant string, task Task) (*onnxPlan, error) {
	have := make(map[string]bool, len(paths))
	for _, p := range paths {
		have[p] = true
	}
	// An image model (preprocessor_config.json and no tokenizer) needs no tokenizer.
	image := have[onnxPreprocessor] && !have[onnxTokenizer]
	required := []string{onnxConfig, onnxTokenizer, onnxTokenizerConfig}
	if image {
		required = []string{onnxConfig, onnxPreprocessor}
	}
	var errs []error
	for _, req := range required {
		if !have[req] {
			errs = append(errs, fmt.Errorf("missing %s", req))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: not an ONNX model folder: %w", ErrInvalidModel, errors.Join(errs...))
	}
	if len(configJSON) > maxConfigJSONBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes, too large for a model config", ErrInvalidModel, onnxConfig, len(configJSON))
	}
	cfg, err := parseHFConfig(configJSON)
	if err != nil {
		return nil, err
	}
	labels, err := cfg.labels()
	if err != nil {
		return nil, err
	}

	encVariants := variantsOf(paths, "encoder_model")
	decVariants := append(variantsOf(paths, "decoder_model_merged"), variantsOf(paths, "decoder_model")...)
	encDec := !image && len(encVariants) > 0 && len(decVariants) > 0 && (task == "" || task == TaskSummarize)

	plan := &onnxPlan{files: slices.Clone(required)}
	// A CLIP-style folder's image tower is onnx/vision_model*.onnx; its
	// model*.onnx, when there is one, is the text and image graph together.
	base := "model"
	if image && task != TaskImageClassify && len(variantsOf(paths, "vision_model")) > 0 {
		base = "vision_model"
	}
	var candidates []string
	if encDec {
		for _, v := range encVariants {
			if slices.Contains(decVariants, v) {
				candidates = append(candidates, v)
			}
		}
	} else {
		candidates = variantsOf(paths, base)
	}
	v, err := chooseVariant(candidates, variant, encDec)
	if err != nil {
		return nil, err
	}
	file := func(base string) string { return onnxDir + base + variantSuffix(v) + ".onnx" }
	if encDec {
		plan.info.Encoder = file("encoder_model")
		plan.info.Decoder = file("decoder_model_merged")
		if !have[plan.info.Decoder] {
			plan.info.Decoder = file("decoder_model")
			if past := file("decoder_with_past_model"); have[past] {
				plan.info.DecoderPast = past
			}
		}
		plan.files = append(plan.files, plan.info.Encoder, plan.info.Decoder)
		if plan.info.DecoderPast != "" {
			plan.files = append(plan.files, plan.info.DecoderPast)
		}
	} else {
		plan.info.Model = file(base)
		plan.files = append(plan.files, plan.info.Model)
	}
	// External data of large models lives next to the graph ("model.onnx_data").
	for _, f := range slices.Clone(plan.files[len(required):]) {
		for _, p := range paths {
			if strings.HasPrefix(p, f+"_data") || strings.HasPrefix(p, f+".data") {
				plan.files = append(plan.files, p)
			}
		}
	}
	for _, opt := range onnxOptionalFiles {
		if have[opt] {
			plan.files = append(plan.files, opt)
		}
	}

	switch {
	case image:
		if plan.tasks, err = imageTasks(cfg, labels, task); err != nil {
			return nil, err
		}
	case task == "":
		plan.tasks = inferONNXTasks(cfg, labels, encDec)
	default:
		if task.isImage() {
			return nil, fmt.Errorf("%w: task %q needs an image model (%s and no %s)", ErrInvalidModel, task, onnxPreprocessor, onnxTokenizer)
		}
		if plan.tasks, err = overrideTasks(task, FormatONNX, labels, encDec); err != nil {
			return nil, err
		}
	}
	plan.info.Architectures = cfg.Architectures
	plan.info.ModelType = cfg.ModelType
	plan.info.Labels = labels
	plan.info.Variant = v
	plan.info.DType = dtypeOfVariant(v)
	plan.info.MaxLength = cfg.MaxPositionEmbeddings
	return plan, nil
}

// variantsOf returns the variants present for onnx/<base>[_<variant>].onnx.
func variantsOf(paths []string, base string) []string {
	var out []string
	prefix := onnxDir + base
	for _, p := range paths {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok || !strings.HasSuffix(rest, ".onnx") {
			continue
		}
		rest = strings.TrimSuffix(rest, ".onnx")
		switch {
		case rest == "":
			out = append(out, "")
		case strings.HasPrefix(rest, "_"):
			v := rest[1:]
			// "decoder_model_merged" also starts with "decoder_model_": not a variant of it.
			if base == "decoder_model" && (v == "merged" || strings.HasPrefix(v, "merged_")) {
				continue
			}
			if v != "" && !strings.Contains(v, "/") {
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func variantSuffix(v string) string {
	if v == "" {
		return ""
	}
	return "_" + v
}

// chooseVariant picks the requested variant, or fp32 ("") when present, or
// the only one there is.
func chooseVariant(candidates []string, want string, encDec bool) (string, error) {
	what := "onnx/model*.onnx"
	if encDec {
		what = "onnx/encoder_model*.onnx with a matching onnx/decoder_model*.onnx"
	}
	if len(candidates) == 0 {
		return "", fmt.Errorf("%w: no %s", ErrInvalidModel, what)
	}
	names := make([]string, len(candidates))
	for i, c := range candidates {
		names[i] = c
		if c == "" {
			names[i] = "(default fp32)"
		}
	}
	if want != "" {
		if slices.Contains(candidates, want) {
			return want, nil
		}
		return "", fmt.Errorf("%w: variant %q not found for %s (available: %s)", ErrInvalidModel, want, what, strings.Join(names, ", "))
	}
	if slices.Contains(candidates, "") {
		return "", nil
	}
	if len(candidates) == 1 {
		return candidates[0], nil
	}
	return "", fmt.Errorf("%w: several variants of %s, choose one with --variant (available: %s)", ErrInvalidModel, what, strings.Join(names, ", "))
}

// dtypeOfVariant names the weight type of a transformers.js-style variant.
func dtypeOfVariant(v string) string {
	switch v {
	case "":
		return "fp32"
	case "quantized":
		return "q8"
	}
	return v
}

// Fields of onnx.ModelProto and their protobuf wire types.
var onnxModelFields = map[uint64]uint64{
	1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2, 26: 2,
}

// checkONNXFile is a cheap sanity check that r (size bytes) holds an ONNX
// ModelProto: non-empty, its leading fields are ModelProto fields with the
// right wire types and lengths that fit, and it has a graph. It reads a few
// bytes per field, never the weights.
func checkONNXFile(r io.ReaderAt, size int64, name string) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s is not an ONNX model: %s", ErrInvalidModel, name, fmt.Sprintf(format, args...))
	}
	if size == 0 {
		return fail("the file is empty")
	}
	var off int64
	for i := 0; i < 64 && off < size; i++ {
		tag, n, err := readVarint(r, off, size)
		if err != nil {
			return fail("at byte %d: %v", off, err)
		}
		off += n
		field, wire := tag>>3, tag&7
		want, known := onnxModelFields[field]
		if !known || want != wire {
			return fail("unexpected protobuf field %d (wire type %d) at byte %d", field, wire, off-n)
		}
		switch wire {
		case 0:
			_, n, err := readVarint(r, off, size)
			if err != nil {
				return fail("at byte %d: %v", off, err)
			}
			off += n
		case 2:
			l, n, err := readVarint(r, off, size)
			if err != nil {
				return fail("at byte %d: %v", off, err)
			}
			off += n
			if l > uint64(size-off) {
				return fail("field %d claims %d bytes but only %d remain (truncated?)", field, l, size-off)
			}
			if field == 7 {
				return nil // the graph is there and fits
			}
			off += int64(l)
		}
	}
	return fail("no graph found")
}

// readVarint reads a protobuf varint at off.
func readVarint(r io.ReaderAt, off, size int64) (uint64, int64, error) {
	var buf [10]byte
	n := int64(len(buf))
	if size-off < n {
		n = size - off
	}
	if n <= 0 {
		return 0, 0, io.ErrUnexpectedEOF
	}
	if _, err := r.ReadAt(buf[:n], off); err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, err
	}
	var v uint64
	for i := int64(0); i < n; i++ {
		b := buf[i]
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errors.New("bad varint")
}
