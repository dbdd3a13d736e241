package models

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/modeld/modeld/backends"
)

// Task is what a model can be used for.
type Task string

// Tasks the store knows: the task vocabulary of backends, the one that the
// pipelines and the configuration use too. A model's tasks are inferred at
// import or pull time (see InferTasks) or given by the user with --task.
const (
	TaskChat      Task = backends.TaskChat      // GGUF text generation
	TaskEmbed     Task = backends.TaskEmbed     // feature extraction
	TaskClassify  Task = backends.TaskClassify  // sequence classification
	TaskZeroShot  Task = backends.TaskZeroShot  // NLI classifier used for zero-shot labels
	TaskRerank    Task = backends.TaskRerank    // cross-encoder with one score
	TaskSummarize Task = backends.TaskSummarize // encoder-decoder generation
	// Image models (preprocessor_config.json instead of a tokenizer).
	TaskImageClassify Task = backends.TaskImageClassify // image classification
	TaskImageEmbed    Task = backends.TaskImageEmbed    // image feature extraction
)

// Tasks lists every known task, in a stable order.
func Tasks() []Task {
	return []Task{TaskChat, TaskEmbed, TaskClassify, TaskZeroShot, TaskRerank, TaskSummarize, TaskImageClassify, TaskImageEmbed}
}

// isImage reports whether t is a task of an image model.
func (t Task) isImage() bool { return t == TaskImageClassify || t == TaskImageEmbed }

// imageTasks infers or checks the task of an image model: an architecture
// ending in ForImageClassification with labels classifies; anything else (a
// ViTModel, a CLIP vision tower) embeds. A classifier may be used to embed
// only when the user says so, and then its logits are the vector.
func imageTasks(cfg *hfConfig, labels []string, task Task) ([]Task, error) {
	classifier := false
	for _, a := range cfg.Architectures {
		classifier = classifier || strings.HasSuffix(a, "ForImageClassification")
	}
	switch task {
	case "":
		if classifier && len(labels) > 0 {
			return []Task{TaskImageClassify}, nil
		}
		return []Task{TaskImageEmbed}, nil
	case TaskImageClassify:
		if len(labels) == 0 {
			return nil, fmt.Errorf("%w: task %q needs id2label in config.json", ErrInvalidModel, task)
		}
		return []Task{task}, nil
	case TaskImageEmbed:
		return []Task{task}, nil
	}
	return nil, fmt.Errorf("%w: task %q needs a text model; this is an image model (%s, no %s)", ErrInvalidModel, task, onnxPreprocessor, onnxTokenizer)
}

// ParseTask returns the Task named s, or an error listing the known tasks.
func ParseTask(s string) (Task, error) {
	for _, t := range Tasks() {
		if string(t) == s {
			return t, nil
		}
	}
	names := make([]string, 0, len(Tasks()))
	for _, t := range Tasks() {
		names = append(names, string(t))
	}
	return "", fmt.Errorf("%w: unknown task %q (known: %s)", ErrInvalidModel, shownID(s), strings.Join(names, ", "))
}

// formatOf returns the format a task needs.
func (t Task) formatOf() Format {
	if t == TaskChat {
		return FormatGGUF
	}
	return FormatONNX
}

// hfConfig is the part of a Hugging Face config.json the store reads.
type hfConfig struct {
	Architectures         []string          `json:"architectures"`
	ModelType             string            `json:"model_type"`
	ID2Label              map[string]string `json:"id2label"`
	NumLabels             *int              `json:"num_labels"`
	MaxPositionEmbeddings int               `json:"max_position_embeddings"`
	IsEncoderDecoder      bool              `json:"is_encoder_decoder"`
}

// parseHFConfig parses config.json.
func parseHFConfig(data []byte) (*hfConfig, error) {
	var c hfConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%w: config.json is not valid JSON: %w", ErrInvalidModel, err)
	}
	return &c, nil
}

// labels returns id2label in id order. Keys must be integers.
func (c *hfConfig) labels() ([]string, error) {
	if len(c.ID2Label) == 0 {
		return nil, nil
	}
	type kv struct {
		id    int
		label string
	}
	kvs := make([]kv, 0, len(c.ID2Label))
	for k, v := range c.ID2Label {
		id, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("%w: config.json id2label key %q is not an integer", ErrInvalidModel, k)
		}
		kvs = append(kvs, kv{id, v})
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].id < kvs[j].id })
	out := make([]string, len(kvs))
	for i, e := range kvs {
		if e.id != i {
			return nil, fmt.Errorf("%w: config.json id2label ids are not 0..%d", ErrInvalidModel, len(kvs)-1)
		}
		out[i] = e.label
	}
	return out, nil
}

// isSequenceClassifier reports whether an architecture ends in
// ForSequenceClassification.
func (c *hfConfig) isSequenceClassifier() bool {
	for _, a := range c.Architectures {
		if strings.HasSuffix(a, "ForSequenceClassification") {
			return true
		}
	}
	return false
}

// numLabels returns num_labels, or the id2label size when num_labels is absent.
func (c *hfConfig) numLabels() int {
	if c.NumLabels != nil {
		return *c.NumLabels
	}
	return len(c.ID2Label)
}

// InferONNXTasks infers the tasks of an ONNX model from its config.json and
// whether it has encoder and decoder files:
//
//   - an encoder file and a decoder file: summarize;
//   - an architecture ending in ForSequenceClassification: classify, or rerank
//     when it has a single label (num_labels == 1); a classifier whose labels
//     include "entailment" and "contradiction" also serves zero-shot-classify;
//   - anything else: embed (feature extraction).
func inferONNXTasks(cfg *hfConfig, labels []string, encoderDecoder bool) []Task {
	switch {
	case encoderDecoder:
		return []Task{TaskSummarize}
	case cfg.isSequenceClassifier():
		if cfg.numLabels() == 1 || len(labels) == 1 {
			return []Task{TaskRerank}
		}
		tasks := []Task{TaskClassify}
		if isNLILabels(labels) {
			tasks = append(tasks, TaskZeroShot)
		}
		return tasks
	default:
		return []Task{TaskEmbed}
	}
}

// isNLILabels reports whether labels contain entailment and contradiction.
func isNLILabels(labels []string) bool {
	var ent, con bool
	for _, l := range labels {
		switch strings.ToLower(l) {
		case "entailment":
			ent = true
		case "contradiction":
			con = true
		}
	}
	return ent && con
}

// overrideTasks validates a --task override against the model's format and
// files and returns the task list to record. Zero-shot implies classify.
func overrideTasks(t Task, format Format, labels []string, encoderDecoder bool) ([]Task, error) {
	if t.formatOf() != format {
		return nil, fmt.Errorf("%w: task %q needs a %s model, this one is %s", ErrInvalidModel, t, t.formatOf(), format)
	}
	switch t {
	case TaskSummarize:
		if !encoderDecoder {
			return nil, fmt.Errorf("%w: task %q needs onnx/encoder_model*.onnx and onnx/decoder_model*.onnx", ErrInvalidModel, t)
		}
	case TaskEmbed, TaskClassify, TaskZeroShot, TaskRerank:
		if encoderDecoder {
			return nil, fmt.Errorf("%w: task %q needs an encoder-only model (onnx/model*.onnx), this one has an encoder and a decoder", ErrInvalidModel, t)
		}
	}
	switch t {
	case TaskClassify:
		if len(labels) == 0 {
			return nil, fmt.Errorf("%w: task %q needs id2label in config.json", ErrInvalidModel, t)
		}
	case TaskZeroShot:
		if !isNLILabels(labels) {
			return nil, fmt.Errorf("%w: task %q needs id2label with entailment and contradiction labels", ErrInvalidModel, t)
		}
		return []Task{TaskClassify, TaskZeroShot}, nil
	}
	return []Task{t}, nil
}
