package pipelines

import (
	"context"

	"github.com/modeld/modeld/backends"
)

// Each pipeline is a backends.Model with its task's capability, so that the
// API finds what a loaded model does by type assertion on backends'
// interfaces alone. A classifier also answers zero-shot calls when its labels
// make it an NLI model (ErrWrongModel otherwise).
var (
	_ backends.Model              = (*Embedder)(nil)
	_ backends.Embedder           = (*Embedder)(nil)
	_ backends.Model              = (*Classifier)(nil)
	_ backends.Classifier         = (*Classifier)(nil)
	_ backends.ZeroShotClassifier = (*Classifier)(nil)
	_ backends.Model              = (*ZeroShot)(nil)
	_ backends.ZeroShotClassifier = (*ZeroShot)(nil)
	_ backends.Model              = (*Reranker)(nil)
	_ backends.Reranker           = (*Reranker)(nil)
	_ backends.Model              = (*Summarizer)(nil)
	_ backends.Summarizer         = (*Summarizer)(nil)

	// Every pipeline tokenizes with its tokenizer.json (tokenize.go).
	_ backends.Tokenizer = (*Embedder)(nil)
	_ backends.Tokenizer = (*Classifier)(nil)
	_ backends.Tokenizer = (*ZeroShot)(nil)
	_ backends.Tokenizer = (*Reranker)(nil)
	_ backends.Tokenizer = (*Summarizer)(nil)
)

// Backend is the registry name the pipelines' models are loaded under.
const Backend = "onnx"

// info describes a pipeline over files running on device.
func (m *modelFiles) info(task Task, device, fallback string) backends.Info {
	return backends.Info{
		Backend:     Backend,
		Path:        m.dir,
		Arch:        m.config.ModelType,
		Task:        string(task),
		ContextSize: m.maxTokens(),
		Slots:       MaxInFlight,
		Device:      device,
		GPUFallback: fallback,
	}
}

// Info describes the loaded model.
func (e *Embedder) Info() backends.Info {
	return e.enc.files.info(TaskEmbed, e.Device(), e.FallbackReason())
}

// Info describes the loaded model.
func (c *Classifier) Info() backends.Info {
	return c.enc.files.info(TaskClassify, c.Device(), c.FallbackReason())
}

// Info describes the loaded model.
func (z *ZeroShot) Info() backends.Info {
	return z.c.enc.files.info(TaskZeroShot, z.Device(), z.FallbackReason())
}

// Info describes the loaded model.
func (r *Reranker) Info() backends.Info {
	return r.c.enc.files.info(TaskRerank, r.Device(), r.FallbackReason())
}

// Info describes the loaded model.
func (s *Summarizer) Info() backends.Info {
	return s.m.files.info(TaskSummarize, s.Device(), s.FallbackReason())
}

// ClassifyZeroShot scores each text against candidateLabels through the
// classifier's zero-shot view; ErrWrongModel when its labels do not make it
// an NLI model.
func (c *Classifier) ClassifyZeroShot(ctx context.Context, texts, candidateLabels []string, opts ZeroShotOptions) (ZeroShotResult, error) {
	z, err := c.ZeroShot()
	if err != nil {
		return ZeroShotResult{}, err
	}
	return z.Classify(ctx, texts, candidateLabels, opts)
}

// ClassifyZeroShot is Classify, under the name of backends.ZeroShotClassifier.
func (z *ZeroShot) ClassifyZeroShot(ctx context.Context, texts, candidateLabels []string, opts ZeroShotOptions) (ZeroShotResult, error) {
	return z.Classify(ctx, texts, candidateLabels, opts)
}
