package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/modeld/modeld/backends/onnx"
	"github.com/modeld/modeld/pipelines"
	"github.com/modeld/modeld/pipelines/tokenizer"
)

// pipelineSide is modeld's embedding pipeline in this process, called as
// modeld serve calls it (pipelines.Embedder.Embed behind its batcher).
type pipelineSide struct {
	e    *pipelines.Embedder
	wl   workload
	opts pipelines.EmbedOptions
	// tokensPerText is the texts' mean token count (special tokens included).
	tokensPerText float64
}

func newPipelineSide(ctx context.Context, rt *onnx.Runtime, dir string, threads int, wait time.Duration, wl workload) (*pipelineSide, error) {
	e, err := pipelines.LoadEmbedder(dir, pipelines.Options{Runtime: rt, Threads: threads, BatchWait: wait})
	if err != nil {
		return nil, err
	}
	on := true
	s := &pipelineSide{e: e, wl: wl, opts: pipelines.EmbedOptions{Pooling: pipelines.PoolingMean, Normalize: &on}}
	all, err := e.Embed(ctx, wl.texts, s.opts) // warm-up, and the token count
	if err != nil {
		return nil, errors.Join(err, e.Close())
	}
	s.tokensPerText = float64(all.Tokens) / float64(len(wl.texts))
	return s, nil
}

func (s *pipelineSide) first(ctx context.Context) ([]float64, error) {
	r, err := s.e.Embed(ctx, s.wl.texts[:1], s.opts)
	if err != nil {
		return nil, err
	}
	return float64s(r.Vectors[0]), nil
}

func (s *pipelineSide) batch(ctx context.Context) (float64, error) {
	t := time.Now()
	for i := range s.wl.calls {
		r, err := s.e.Embed(ctx, s.wl.batchTexts(i), s.opts)
		if err != nil {
			return 0, err
		}
		if len(r.Vectors) != s.wl.batch {
			return 0, fmt.Errorf("pipeline: %d vectors, want %d", len(r.Vectors), s.wl.batch)
		}
	}
	return rate(s.wl.calls*s.wl.batch, time.Since(t)), nil
}

func (s *pipelineSide) concurrent(ctx context.Context) (float64, error) {
	t := time.Now()
	err := concurrently(s.wl.concurrency, func(c int) error {
		for i := range s.wl.calls {
			if _, err := s.e.Embed(ctx, []string{s.wl.singleText(c, i)}, s.opts); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return rate(s.wl.calls*s.wl.concurrency, time.Since(t)), nil
}

func (s *pipelineSide) close() error { return s.e.Close() }

// rawSide is ONNX Runtime alone: onnx.Session.Run on the benchmark's batches,
// tokenized and padded beforehand, no pooling. It is the ceiling for the model
// on these threads.
type rawSide struct {
	sess  *onnx.Session
	feeds []map[string]*onnx.Tensor
	wl    workload
}

func newRawSide(ctx context.Context, rt *onnx.Runtime, dir string, threads int, wl workload) (*rawSide, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	sess, err := rt.NewSession(filepath.Join(dir, "onnx", "model.onnx"), onnx.SessionOptions{Threads: threads, Outputs: []string{"last_hidden_state"}})
	if err != nil {
		return nil, err
	}
	s := &rawSide{sess: sess, wl: wl, feeds: make([]map[string]*onnx.Tensor, wl.calls)}
	for i := range s.feeds {
		encs := tok.EncodeBatch(wl.batchTexts(i), tokenizer.WithTruncation(0), tokenizer.WithPadding(tokenizer.PadLongest))
		s.feeds[i] = rawFeed(sess, encs)
	}
	if _, err := sess.Run(ctx, s.feeds[0]); err != nil { // warm-up
		return nil, errors.Join(err, sess.Close())
	}
	return s, nil
}

func (s *rawSide) batch(ctx context.Context) (float64, error) {
	t := time.Now()
	for _, f := range s.feeds {
		if _, err := s.sess.Run(ctx, f); err != nil {
			return 0, err
		}
	}
	return rate(s.wl.calls*s.wl.batch, time.Since(t)), nil
}

func (s *rawSide) close() error { return s.sess.Close() }

// rawFeed packs padded encodings of equal length into the model's inputs.
func rawFeed(sess *onnx.Session, encs []*tokenizer.Encoding) map[string]*onnx.Tensor {
	b, n := int64(len(encs)), int64(len(encs[0].IDs))
	ids, mask, types := make([]int64, 0, b*n), make([]int64, 0, b*n), make([]int64, 0, b*n)
	for _, e := range encs {
		ids = append(ids, e.IDs...)
		mask = append(mask, e.AttentionMask...)
		types = append(types, e.TypeIDs...)
	}
	in := map[string]*onnx.Tensor{"input_ids": onnx.NewInt64(ids, b, n)}
	if sess.HasInput("attention_mask") {
		in["attention_mask"] = onnx.NewInt64(mask, b, n)
	}
	if sess.HasInput("token_type_ids") {
		in["token_type_ids"] = onnx.NewInt64(types, b, n)
	}
	return in
}

// concurrently runs f(0..n-1) in n goroutines and returns their errors joined.
func concurrently(n int, f func(c int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for c := range n {
		wg.Go(func() { errs[c] = f(c) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func float64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
