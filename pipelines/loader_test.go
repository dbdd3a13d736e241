package pipelines

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestLoadByTask(t *testing.T) {
	opts := testOptions(t)
	cases := map[Task]string{
		TaskEmbed: "embed-mean", TaskClassify: "classify", TaskZeroShot: "nli", TaskRerank: "rerank", TaskSummarize: "summarize",
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
