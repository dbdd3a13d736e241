package pipelines

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modeld/modeld/backends/onnx"
	"github.com/modeld/modeld/pipelines/tokenizer"
)

// seqOut is one sequence's slice of a model output: Rows×Cols floats. For
// last_hidden_state that is tokens×hidden (padding removed), for logits 1×labels.
type seqOut struct {
	Data       []float32
	Rows, Cols int
	// Mask is the sequence's attention mask (without padding) for token outputs.
	Mask []int64
}

// encoderModel is an encoder-only model (BERT-like) behind a Batcher: every
// request's encodings join one padded forward pass.
type encoderModel struct {
	files *modelFiles
	sess  *onnx.Session
	// lanes, on a CPU model, is a second session of the same file with a share of
	// the threads each, run by laneCount goroutines at once on the groups of a
	// merged batch (nil: every run on sess).
	lanes     *onnx.Session
	laneCount int
	laneRuns  atomic.Int64 // session runs made on lanes
	output    string
	batcher   *Batcher[[]*tokenizer.Encoding, []seqOut]
	padID     int64
	left      bool         // padding side
	passes    atomic.Int64 // forward passes run (merged batches count once)
	budget    int          // padded tokens per forward pass
	onPass    func(PassStats)
}

// PassStats describes one merged forward pass of an encoder pipeline.
type PassStats struct {
	Requests     int // requests merged
	Sequences    int // texts or pairs
	Tokens       int // real tokens
	PaddedTokens int // tokens fed, padding included
	Runs         int // session runs the pass was cut into
	Seconds      float64
}

// loadEncoder opens dir/onnx/model.onnx and checks that it produces output.
func loadEncoder(files *modelFiles, output, task string, opts Options) (*encoderModel, error) {
	path, err := files.onnxPath("model.onnx", task)
	if err != nil {
		return nil, err
	}
	sess, err := opts.session(path)
	if err != nil {
		return nil, fmt.Errorf("pipelines: %w", err)
	}
	m := &encoderModel{files: files, sess: sess, output: output, left: files.tok.PaddingSide() == "left"}
	if err := m.check(task); err != nil {
		return nil, closeAfter(sess, err)
	}
	var size int64
	if st, err := os.Stat(path); err == nil {
		size = st.Size() // external weights beside it are not counted
	}
	if n, threads := LaneSplit(opts.Threads, opts.Lanes, size); n > 1 && sess.Device() == onnx.DeviceCPU {
		if m.lanes, err = opts.laneSession(path, threads); err != nil {
			return nil, closeAfter(sess, fmt.Errorf("pipelines: second session for parallel runs: %w", err))
		}
		m.laneCount = n
	}
	m.onPass = opts.OnPass
	m.padID, _ = files.tok.PadID()
	cfg := opts.batcherConfig()
	m.budget = cfg.TokenBudget
	m.batcher = newBatcher(cfg, encodingsCost, m.runBatch, opts.batchHooks)
	return m, nil
}

func (m *encoderModel) check(task string) error {
	hasOut := false
	var outs []string
	for _, o := range m.sess.Outputs() {
		outs = append(outs, o.Name)
		hasOut = hasOut || o.Name == m.output
	}
	if !hasOut {
		return fmt.Errorf("pipelines: %s has outputs %v, a %s model needs %q: %w", m.files.dir, outs, task, m.output, ErrWrongModel)
	}
	for _, in := range m.sess.Inputs() {
		switch in.Name {
		case "input_ids", "attention_mask", "token_type_ids":
			if in.Type != onnx.Int64 {
				return fmt.Errorf("pipelines: %s: input %s is %s, want int64: %w", m.files.dir, in.Name, in.Type, ErrWrongModel)
			}
		default:
			return fmt.Errorf("pipelines: %s has input %q, which a %s pipeline cannot feed: %w", m.files.dir, in.Name, task, ErrWrongModel)
		}
	}
	if !m.sess.HasInput("input_ids") {
		return fmt.Errorf("pipelines: %s has no input_ids input: %w", m.files.dir, ErrWrongModel)
	}
	return nil
}

func closeAfter(s *onnx.Session, err error) error {
	if cerr := s.Close(); cerr != nil {
		return fmt.Errorf("%w (and closing: %v)", err, cerr)
	}
	return err
}

func encodingsCost(encs []*tokenizer.Encoding) Cost {
	c := Cost{Seqs: len(encs)}
	for _, e := range encs {
		c.MaxLen = max(c.MaxLen, len(e.IDs))
	}
	return c
}

// forward runs encodings through the model, merged with concurrent requests. A
// request larger than the token budget is split into budget-sized chunks of
// similar lengths (less padding), run one after another.
func (m *encoderModel) forward(ctx context.Context, encs []*tokenizer.Encoding) ([]seqOut, error) {
	if padded := encodingsCost(encs); padded.Seqs*padded.MaxLen <= m.budget {
		return m.batcher.Do(ctx, encs)
	}
	order := make([]int, len(encs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(encs[a].IDs), len(encs[b].IDs)) })
	out := make([]seqOut, len(encs))
	for start := 0; start < len(order); {
		end := start + 1
		for end < len(order) && (end-start+1)*len(encs[order[end]].IDs) <= m.budget {
			end++
		}
		chunk := make([]*tokenizer.Encoding, end-start)
		for i, idx := range order[start:end] {
			chunk[i] = encs[idx]
		}
		res, err := m.batcher.Do(ctx, chunk)
		if err != nil {
			return nil, err
		}
		for i, idx := range order[start:end] {
			out[idx] = res[i]
		}
		start = end
	}
	return out, nil
}

// runBatch pads every request's encodings into one batch, runs it once and splits
// the output back per request.
func (m *encoderModel) runBatch(ctx context.Context, reqs [][]*tokenizer.Encoding) ([][]seqOut, error) {
	m.passes.Add(1)
	start := time.Now()
	var all []*tokenizer.Encoding
	for _, r := range reqs {
		all = append(all, r...)
	}
	out, st, err := m.runSorted(ctx, all)
	if err != nil {
		return nil, err
	}
	if m.onPass != nil {
		st.Requests, st.Seconds = len(reqs), time.Since(start).Seconds()
		m.onPass(st)
	}
	res := make([][]seqOut, len(reqs))
	i := 0
	for r, encs := range reqs {
		res[r] = out[i : i+len(encs)]
		i += len(encs)
	}
	return res, nil
}

// runSorted sorts encs by length, cuts them into groups that spend the fewest
// padded tokens and runs (see partition), runs each group as one padded session
// run, and returns the outputs in the order of encs. On a CPU model with lanes
// the groups run in parallel, each on its own share of the threads. A sequence's
// output does not depend on the others in its run: padding is masked.
func (m *encoderModel) runSorted(ctx context.Context, encs []*tokenizer.Encoding) ([]seqOut, PassStats, error) {
	order := make([]int, len(encs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(encs[order[a]].IDs) < len(encs[order[b]].IDs) })
	lengths := make([]int, len(order))
	for i, j := range order {
		lengths[i] = len(encs[j].IDs)
	}
	minGroups := 1
	if m.lanes != nil {
		minGroups = m.laneCount
	}
	groups := partition(lengths, runOverhead, minGroups)
	st := PassStats{Sequences: len(encs), Runs: len(groups)}
	for _, g := range groups {
		st.PaddedTokens += (g.end - g.start) * lengths[g.end-1]
	}
	for _, l := range lengths {
		st.Tokens += l
	}
	out := make([]seqOut, len(encs))
	run := func(sess *onnx.Session, g group) error {
		idx := order[g.start:g.end]
		part := make([]*tokenizer.Encoding, len(idx))
		for i, j := range idx {
			part[i] = encs[j]
		}
		res, err := m.runEncodings(ctx, sess, part)
		if err != nil {
			return err
		}
		for i, j := range idx {
			out[j] = res[i]
		}
		return nil
	}
	if m.lanes == nil || len(groups) < 2 {
		for _, g := range groups {
			if err := run(m.sess, g); err != nil {
				return nil, st, err
			}
		}
		return out, st, nil
	}
	// Costliest first, each lane taking the next group when it is free: the
	// lanes finish close together.
	slices.SortStableFunc(groups, func(a, b group) int {
		return cmp.Compare(groupCost(lengths, b, runOverhead), groupCost(lengths, a, runOverhead))
	})
	var next atomic.Int64
	errs := make([]error, min(m.laneCount, len(groups)))
	var wg sync.WaitGroup
	for l := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1)) - 1
				if k >= len(groups) {
					return
				}
				m.laneRuns.Add(1)
				if err := run(m.lanes, groups[k]); err != nil {
					errs[l] = err
					next.Store(int64(len(groups))) // the other lanes stop after their run
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, st, err
	}
	return out, st, nil
}

func (m *encoderModel) runEncodings(ctx context.Context, sess *onnx.Session, encs []*tokenizer.Encoding) ([]seqOut, error) {
	b := int64(len(encs))
	seq := int64(encodingsCost(encs).MaxLen)
	ids := make([]int64, b*seq)
	mask := make([]int64, b*seq)
	types := make([]int64, b*seq)
	offsets := make([]int, len(encs)) // where each sequence starts in its padded row
	for i, e := range encs {
		off := 0
		if m.left {
			off = int(seq) - len(e.IDs)
		}
		offsets[i] = off
		row := int64(i) * seq
		for j := range ids[row : row+seq] {
			ids[row+int64(j)] = m.padID
		}
		copy(ids[row+int64(off):], e.IDs)
		copy(mask[row+int64(off):], e.AttentionMask)
		copy(types[row+int64(off):], e.TypeIDs)
	}
	in := map[string]*onnx.Tensor{"input_ids": onnx.NewInt64(ids, b, seq)}
	if sess.HasInput("attention_mask") {
		in["attention_mask"] = onnx.NewInt64(mask, b, seq)
	}
	if sess.HasInput("token_type_ids") {
		in["token_type_ids"] = onnx.NewInt64(types, b, seq)
	}
	outs, err := sess.Run(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("pipelines: forward: %w", err)
	}
	t := outs[m.output]
	return splitOutput(t, encs, offsets, int(seq))
}

// splitOutput cuts a [B, S, H] or [B, L] output into per-sequence pieces.
func splitOutput(t *onnx.Tensor, encs []*tokenizer.Encoding, offsets []int, seq int) ([]seqOut, error) {
	if t == nil || len(t.F32) == 0 && t.Len() != 0 {
		return nil, fmt.Errorf("pipelines: model output is not float32")
	}
	if int(t.Shape[0]) != len(encs) {
		return nil, fmt.Errorf("pipelines: model output batch %d, want %d", t.Shape[0], len(encs))
	}
	res := make([]seqOut, len(encs))
	switch len(t.Shape) {
	case 2:
		cols := int(t.Shape[1])
		for i := range encs {
			res[i] = seqOut{Data: t.F32[i*cols : (i+1)*cols], Rows: 1, Cols: cols}
		}
	case 3:
		if int(t.Shape[1]) != seq {
			return nil, fmt.Errorf("pipelines: model output has %d positions, want %d", t.Shape[1], seq)
		}
		h := int(t.Shape[2])
		for i, e := range encs {
			start := (i*seq + offsets[i]) * h
			n := len(e.IDs)
			res[i] = seqOut{Data: t.F32[start : start+n*h], Rows: n, Cols: h, Mask: e.AttentionMask}
		}
	default:
		return nil, fmt.Errorf("pipelines: model output has shape %v", t.Shape)
	}
	return res, nil
}

func (m *encoderModel) close() error {
	m.batcher.Close()
	err := m.sess.Close()
	if m.lanes != nil {
		err = errors.Join(err, m.lanes.Close())
	}
	return err
}

// usage counts what a request fed the model.
type usage struct {
	tokens    int // tokens after truncation, special tokens included
	truncated int // texts (or pairs) cut to the model's length
}

func (u *usage) add(e *tokenizer.Encoding) {
	u.tokens += len(e.IDs)
	if e.Truncated > 0 {
		u.truncated++
	}
}

// preprocess tokenizes texts, truncated to the model's length. It stops
// when ctx ends, a pattern of the model's tokenizer times out, or the
// patterns spend the request's regex budget (tokenizer.WithRegexBudget).
func (m *encoderModel) preprocess(ctx context.Context, texts []string) ([]*tokenizer.Encoding, usage, error) {
	ctx = tokenizer.WithRegexBudget(ctx) // one budget for all the request's texts
	var u usage
	encs := make([]*tokenizer.Encoding, len(texts))
	for i, t := range texts {
		var err error
		if encs[i], err = m.files.tok.EncodeContext(ctx, t, tokenizer.WithTruncation(m.files.maxTokens())); err != nil {
			return nil, u, fmt.Errorf("pipelines: %w", err)
		}
		u.add(encs[i])
	}
	return encs, u, nil
}

// preprocessPairs tokenizes text pairs (premise/hypothesis, query/document),
// truncated to the model's length.
func (m *encoderModel) preprocessPairs(ctx context.Context, pairs [][2]string) ([]*tokenizer.Encoding, usage, error) {
	ctx = tokenizer.WithRegexBudget(ctx) // one budget for all the request's pairs
	var u usage
	encs := make([]*tokenizer.Encoding, len(pairs))
	for i, p := range pairs {
		var err error
		if encs[i], err = m.files.tok.EncodePairContext(ctx, p[0], p[1], tokenizer.WithTruncation(m.files.maxTokens())); err != nil {
			return nil, u, fmt.Errorf("pipelines: %w", err)
		}
		u.add(encs[i])
	}
	return encs, u, nil
}
