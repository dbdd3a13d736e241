package pipelines

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends"
)

func TestLoadByTask(t *testing.T) {
	opts := testOptions(t)
	cases := map[Task]string{
		TaskEmbed: "embed-mean", TaskClassify: "classify", TaskZeroShot: "nli", TaskRerank: "rerank", TaskSummarize: "summarize",
		TaskImageClassify: "vit-classify", TaskImageEmbed: "vit-embed",
	}
	for _, task := range Tasks() {
		parsed, err := ParseTask(string(task))
		if err != nil || parsed != task {
			t.Fatalf("ParseTask(%s) = %s, %v", task, parsed, err)
		}
		p, err := Load(task, modelDir(t, cases[task]), opts)
		if err != nil {
			t.Fatalf("%s: %v", task, err)
		}
		if p.Task() != task || p.Device() != "cpu" || p.FallbackReason() != "" || p.Size() < 100_000 {
			t.Errorf("%s: task %s device %s fallback %q size %d", task, p.Task(), p.Device(), p.FallbackReason(), p.Size())
		}
		// Each pipeline is a backends.Model that describes itself in the
		// store's task names, with its task's capability.
		if info := p.Info(); info.Backend != Backend || info.Task != string(task) || info.Device != "cpu" || info.Slots != MaxInFlight || info.Path == "" {
			t.Errorf("%s: Info() = %+v", task, info)
		}
		if !hasCapability(p, task) {
			t.Errorf("%s: %T lacks its task's capability", task, p)
		}
		closeP(t, p)
	}
	if _, err := Load(TaskEmbed, modelDir(t, "embed-mean"), Options{}); err == nil || !strings.Contains(err.Error(), "Runtime is nil") {
		t.Fatalf("no runtime: %v", err)
	}
}

// TestGPUAllowedFallsBackToCPU: a task on the GPU allowlist asks for CUDA; the
// bootstrapped ONNX Runtime is the CPU build, so the pipeline runs on CPU, says
// why, and computes the same vectors.
func TestGPUAllowedFallsBackToCPU(t *testing.T) {
	opts := testOptions(t)
	cpu, err := LoadEmbedder(modelDir(t, "embed-mean"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, cpu)
	opts.UseGPU = true
	gpu, err := LoadEmbedder(modelDir(t, "embed-mean"), opts)
	if err != nil {
		t.Fatalf("UseGPU without CUDA must fall back, got %v", err)
	}
	defer closeP(t, gpu)
	if gpu.Device() != "cpu" || !strings.Contains(gpu.FallbackReason(), "CUDA") {
		t.Fatalf("device %q fallback %q", gpu.Device(), gpu.FallbackReason())
	}
	ctx := context.Background()
	a, err := cpu.Embed(ctx, []string{"hello world"}, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := gpu.Embed(ctx, []string{"hello world"}, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Device != "cpu" || maxDiff(a.Vectors[0], b.Vectors[0]) != 0 {
		t.Fatalf("fallback result device %q differs by %g", b.Device, maxDiff(a.Vectors[0], b.Vectors[0]))
	}
	s, err := LoadSummarizer(modelDir(t, "summarize"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, s)
	if s.Device() != "cpu" || s.FallbackReason() == "" {
		t.Fatalf("summarizer device %q fallback %q", s.Device(), s.FallbackReason())
	}
}

func TestClosedPipeline(t *testing.T) {
	e, err := LoadEmbedder(modelDir(t, "embed-mean"), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Embed(context.Background(), []string{"x"}, EmbedOptions{}); !errors.Is(err, ErrBatcherClosed) {
		t.Fatalf("embed after close: %v", err)
	}
}

// hasCapability reports whether p has the backends capability of task.
func hasCapability(p Pipeline, task Task) bool {
	var ok bool
	switch task {
	case TaskEmbed:
		_, ok = p.(backends.Embedder)
	case TaskClassify:
		_, ok = p.(backends.Classifier)
	case TaskZeroShot:
		_, ok = p.(backends.ZeroShotClassifier)
	case TaskRerank:
		_, ok = p.(backends.Reranker)
	case TaskSummarize:
		_, ok = p.(backends.Summarizer)
	case TaskImageClassify:
		_, ok = p.(backends.ImageClassifier)
	case TaskImageEmbed:
		_, ok = p.(backends.ImageEmbedder)
	}
	return ok
}

// TestErrorsSayTheirStatus: the pipelines' errors are backends' kinds, so the
// API maps them with no knowledge of this package: a bad input or a wrong
// model is a 400, a full or closed batcher a 503 with a retry-after.
func TestErrorsSayTheirStatus(t *testing.T) {
	for err, want := range map[error]int{
		ErrInvalidInput: 400, ErrWrongModel: 400, ErrBusy: 503, ErrBatcherClosed: 503,
	} {
		var se backends.StatusError
		if !errors.As(fmt.Errorf("wrapped: %w", err), &se) || se.HTTPStatus() != want {
			t.Errorf("%v: status %v, want %d", err, se, want)
			continue
		}
		var ra backends.RetryAfterError
		if want == 503 && (!errors.As(err, &ra) || ra.RetryAfterDuration() <= 0) {
			t.Errorf("%v: no retry-after", err)
		}
	}
	if _, err := ParsePooling("max"); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("ParsePooling(max) = %v, want ErrInvalidInput", err)
	}
}
