package pipelines

import (
	"fmt"

	"github.com/modeld/modeld/backends"
)

// Task names a pipeline kind.
type Task string

// Tasks, named as backends (and so the model store) name them.
const (
	TaskEmbed     Task = backends.TaskEmbed
	TaskClassify  Task = backends.TaskClassify
	TaskZeroShot  Task = backends.TaskZeroShot
	TaskRerank    Task = backends.TaskRerank
	TaskSummarize Task = backends.TaskSummarize
)

// Tasks lists every task, in a stable order.
func Tasks() []Task {
	return []Task{TaskEmbed, TaskClassify, TaskZeroShot, TaskRerank, TaskSummarize, TaskImageClassify, TaskImageEmbed}
}

// ParseTask accepts a task name (embed, classify, zero-shot-classify, rerank,
// summarize, image-classify, image-embed).
func ParseTask(s string) (Task, error) {
	for _, t := range Tasks() {
		if string(t) == s {
			return t, nil
		}
	}
	return "", fmt.Errorf("pipelines: unknown task %q (want one of %v): %w", s, Tasks(), ErrInvalidInput)
}

// Pipeline is what every loaded pipeline offers besides its task method: it
// is a backends.Model, whose task capability (backends.Embedder, ...) a type
// assertion finds.
type Pipeline interface {
	backends.Model
	Task() Task
	// Device is where the model runs: "cpu" or "cuda:N".
	Device() string
	// FallbackReason says why a pipeline asked to use the GPU runs on CPU ("" if not).
	FallbackReason() string
	// Size is the bytes of the model folder's files.
	Size() int64
}

var (
	_ Pipeline = (*Embedder)(nil)
	_ Pipeline = (*Classifier)(nil)
	_ Pipeline = (*ZeroShot)(nil)
	_ Pipeline = (*Reranker)(nil)
	_ Pipeline = (*Summarizer)(nil)
)

// Load loads the model folder dir as a pipeline for task. The result's concrete
// type is *Embedder, *Classifier, *ZeroShot, *Reranker, *Summarizer,
// *ImageClassifier or *ImageEmbedder.
func Load(task Task, dir string, opts Options) (Pipeline, error) {
	switch task {
	case TaskEmbed:
		return loaded(LoadEmbedder(dir, opts))
	case TaskClassify:
		return loaded(LoadClassifier(dir, opts))
	case TaskZeroShot:
		return loaded(LoadZeroShot(dir, opts))
	case TaskRerank:
		return loaded(LoadReranker(dir, opts))
	case TaskSummarize:
		return loaded(LoadSummarizer(dir, opts))
	case TaskImageClassify:
		return loaded(LoadImageClassifier(dir, opts))
	case TaskImageEmbed:
		return loaded(LoadImageEmbedder(dir, opts))
	}
	return nil, fmt.Errorf("pipelines: unknown task %q: %w", task, ErrInvalidInput)
}

// loaded keeps a failed load from returning a non-nil Pipeline holding a nil pointer.
func loaded[P Pipeline](p P, err error) (Pipeline, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}
