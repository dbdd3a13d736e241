package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
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

// newPipelineSide loads the pipeline as modeld serve does; lanes is
// Options.Lanes (0: modeld's default).
func newPipelineSide(ctx context.Context, rt *onnx.Runtime, dir string, threads, lanes int, wait time.Duration, wl workload) (*pipelineSide, error) {
	e, err := pipelines.LoadEmbedder(dir, pipelines.Options{Runtime: rt, Threads: threads, Lanes: lanes, BatchWait: wait})
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
// tokenized and padded beforehand, no pooling: the direct library call. With
// chunk > 0 each batch is instead sorted by length and run as sub-batches of
// chunk texts, each padded to its own longest text. With lanes > 1 the
// sub-batches run that many at once, on a session of threads/lanes threads.
type rawSide struct {
	sess  *onnx.Session
	feeds []map[string]*onnx.Tensor
	lanes int
	wl    workload
	// tokens and padded count the real and the padded tokens of one run.
	tokens, padded int
}

func newRawSide(ctx context.Context, rt *onnx.Runtime, dir string, threads, chunk, lanes int, wl workload) (*rawSide, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	lanes = max(lanes, 1)
	sess, err := rt.NewSession(filepath.Join(dir, "onnx", "model.onnx"), onnx.SessionOptions{Threads: max(threads/lanes, 1), Outputs: []string{"last_hidden_state"}})
	if err != nil {
		return nil, err
	}
	s := &rawSide{sess: sess, lanes: lanes, wl: wl}
	for i := range wl.calls {
		for _, texts := range subBatches(tok, wl.batchTexts(i), chunk) {
			encs := tok.EncodeBatch(texts, tokenizer.WithTruncation(0), tokenizer.WithPadding(tokenizer.PadLongest))
			s.feeds = append(s.feeds, rawFeed(sess, encs))
			for _, e := range encs {
				s.padded += len(e.IDs)
				for _, m := range e.AttentionMask {
					s.tokens += int(m)
				}
			}
		}
	}
	if _, err := sess.Run(ctx, s.feeds[0]); err != nil { // warm-up
		return nil, errors.Join(err, sess.Close())
	}
	return s, nil
}

// subBatches is texts as one batch (chunk <= 0), or sorted by token count and
// cut into batches of chunk texts.
func subBatches(tok *tokenizer.Tokenizer, texts []string, chunk int) [][]string {
	if chunk <= 0 {
		return [][]string{texts}
	}
	n := make(map[string]int, len(texts))
	for _, t := range texts {
		n[t] = len(tok.Encode(t, tokenizer.WithTruncation(0)).IDs)
	}
	sorted := slices.Clone(texts)
	slices.SortStableFunc(sorted, func(a, b string) int { return cmp.Compare(n[a], n[b]) })
	var out [][]string
	for start := 0; start < len(sorted); start += chunk {
		out = append(out, sorted[start:min(start+chunk, len(sorted))])
	}
	return out
}

func (s *rawSide) batch(ctx context.Context) (float64, error) {
	t := time.Now()
	if s.lanes == 1 {
		for _, f := range s.feeds {
			if _, err := s.sess.Run(ctx, f); err != nil {
				return 0, err
			}
		}
		return rate(s.wl.calls*s.wl.batch, time.Since(t)), nil
	}
	// Each call's sub-batches, s.lanes at a time.
	per := len(s.feeds) / s.wl.calls
	for call := range s.wl.calls {
		feeds := s.feeds[call*per : (call+1)*per]
		err := concurrently(s.lanes, func(l int) error {
			for i := l; i < len(feeds); i += s.lanes {
				if _, err := s.sess.Run(ctx, feeds[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
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
