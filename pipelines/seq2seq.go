package pipelines

import (
	"context"
	"fmt"
	"strings"

	"github.com/modeld/modeld/backends/onnx"
	"github.com/modeld/modeld/pipelines/tokenizer"
)

// seq2seq is an encoder-decoder model: onnx/encoder_model.onnx plus one of the
// decoder layouts transformers.js and Optimum export:
//
//   - onnx/decoder_model_merged.onnx with use_cache_branch and past_key_values.*
//     inputs: one session, KV cache (merged);
//   - onnx/decoder_model.onnx plus onnx/decoder_with_past_model.onnx: the
//     first for the first step (its present.* outputs start the cache), the
//     second for every later step (split);
//   - a decoder with only input_ids, encoder_attention_mask and
//     encoder_hidden_states, under either name: the whole decoder sequence
//     every step, no cache (plain).
type seq2seq struct {
	files    *modelFiles
	encoder  *onnx.Session
	decoder  *onnx.Session // the merged, plain or split first-step decoder
	withPast *onnx.Session // the split layout's later-step decoder; nil otherwise
	merged   bool
	heads    int64 // decoder attention heads, for the empty cache
	headDim  int64
}

func loadSeq2Seq(files *modelFiles, opts Options) (_ *seq2seq, err error) {
	const task = "summarization (encoder-decoder)"
	encPath, err := files.onnxPath("encoder_model.onnx", task)
	if err != nil {
		return nil, err
	}
	decPath, merr := files.onnxPath("decoder_model_merged.onnx", task)
	pastPath := ""
	if merr != nil {
		if decPath, err = files.onnxPath("decoder_model.onnx", task); err != nil {
			return nil, err
		}
		if p, perr := files.onnxPath("decoder_with_past_model.onnx", task); perr == nil {
			pastPath = p
		}
	}
	m := &seq2seq{files: files}
	defer func() {
		if err != nil {
			if cerr := m.close(); cerr != nil {
				err = fmt.Errorf("%w (and closing: %v)", err, cerr)
			}
		}
	}()
	if m.encoder, err = opts.session(encPath); err != nil {
		return nil, fmt.Errorf("pipelines: %w", err)
	}
	// A decoder that only computes logits gets only that output; one whose
	// present.* outputs start or carry the cache gets them all.
	var outputs []string
	if merr != nil && pastPath == "" {
		outputs = []string{"logits"}
	}
	if m.decoder, err = opts.session(decPath, outputs...); err != nil {
		return nil, fmt.Errorf("pipelines: %w", err)
	}
	// The layout is what the decoder takes, not what its file is called.
	m.merged = m.decoder.HasInput("use_cache_branch")
	if pastPath != "" {
		if m.withPast, err = opts.session(pastPath); err != nil {
			return nil, fmt.Errorf("pipelines: %w", err)
		}
	}
	return m, m.check()
}

// cached reports whether decoding keeps a KV cache (merged or split).
func (m *seq2seq) cached() bool { return m.merged || m.withPast != nil }

func (m *seq2seq) check() error {
	dir := m.files.dir
	for _, name := range []string{"input_ids", "attention_mask"} {
		if !m.encoder.HasInput(name) {
			return fmt.Errorf("pipelines: %s encoder has no %s input: %w", dir, name, ErrWrongModel)
		}
	}
	if !hasOutput(m.encoder, "last_hidden_state") {
		return fmt.Errorf("pipelines: %s encoder has no last_hidden_state output: %w", dir, ErrWrongModel)
	}
	if err := m.checkDecoder(m.decoder, m.merged, false); err != nil {
		return err
	}
	if !m.decoder.HasInput("input_ids") || !m.decoder.HasInput("encoder_hidden_states") {
		return fmt.Errorf("pipelines: %s decoder lacks input_ids or encoder_hidden_states: %w", dir, ErrWrongModel)
	}
	if m.withPast != nil {
		if err := m.checkDecoder(m.withPast, false, true); err != nil {
			return err
		}
		if !m.withPast.HasInput("input_ids") || !m.withPast.HasInput("past_key_values.0.decoder.key") {
			return fmt.Errorf("pipelines: %s decoder_with_past_model.onnx lacks input_ids or past_key_values: %w", dir, ErrWrongModel)
		}
		if !hasOutput(m.decoder, "present.0.decoder.key") || !hasOutput(m.decoder, "present.0.encoder.key") {
			return fmt.Errorf("pipelines: %s decoder_model.onnx has no present.* outputs to start decoder_with_past_model.onnx's cache: %w", dir, ErrWrongModel)
		}
	}
	if m.merged && (m.heads <= 0 || m.headDim <= 0) {
		c := m.files.config
		heads := max(c.DecoderAttentionHeads, c.NumHeads)
		if heads == 0 {
			return fmt.Errorf("pipelines: %s: cannot tell the decoder's attention heads: %w", dir, ErrWrongModel)
		}
		m.heads = int64(heads)
		m.headDim = int64(c.DKV)
		if m.headDim == 0 {
			m.headDim = int64(c.DModel / heads)
		}
	}
	return nil
}

// checkDecoder refuses a decoder with an input the summarizer cannot feed.
// merged allows use_cache_branch, and merged or past the cache inputs.
func (m *seq2seq) checkDecoder(d *onnx.Session, merged, past bool) error {
	for _, in := range d.Inputs() {
		switch {
		case in.Name == "input_ids", in.Name == "encoder_attention_mask", in.Name == "encoder_hidden_states":
		case merged && in.Name == "use_cache_branch":
		case (merged || past) && strings.HasPrefix(in.Name, "past_key_values."):
			if len(in.Shape) != 4 {
				return fmt.Errorf("pipelines: %s: cache input %s has shape %v, want 4 dimensions: %w", m.files.dir, in.Name, in.Shape, ErrWrongModel)
			}
			if merged {
				m.heads, m.headDim = in.Shape[1], in.Shape[3]
			}
		default:
			return fmt.Errorf("pipelines: %s decoder has input %q, which the summarizer cannot feed: %w", m.files.dir, in.Name, ErrWrongModel)
		}
	}
	return nil
}

func hasOutput(s *onnx.Session, name string) bool {
	for _, o := range s.Outputs() {
		if o.Name == name {
			return true
		}
	}
	return false
}

// encode runs the encoder over padded encodings: hidden states [B, S, H] and the
// attention mask [B, S].
func (m *seq2seq) encode(ctx context.Context, encs []*tokenizer.Encoding) (hidden, mask *onnx.Tensor, err error) {
	b, s := int64(len(encs)), int64(0)
	for _, e := range encs {
		s = max(s, int64(len(e.IDs)))
	}
	ids := make([]int64, b*s)
	am := make([]int64, b*s)
	pad, _ := m.files.tok.PadID()
	left := m.files.tok.PaddingSide() == "left"
	for i, e := range encs {
		row := ids[int64(i)*s : int64(i+1)*s]
		for j := range row {
			row[j] = pad
		}
		off := int64(0)
		if left {
			off = s - int64(len(e.IDs))
		}
		copy(row[off:], e.IDs)
		copy(am[int64(i)*s+off:], e.AttentionMask)
	}
	mask = onnx.NewInt64(am, b, s)
	out, err := m.encoder.Run(ctx, map[string]*onnx.Tensor{"input_ids": onnx.NewInt64(ids, b, s), "attention_mask": mask})
	if err != nil {
		return nil, nil, fmt.Errorf("pipelines: encoder: %w", err)
	}
	return out["last_hidden_state"], mask, nil
}

// decodeState is the decoder's running state over rows (texts × beams).
type decodeState struct {
	seqs   [][]int64 // decoder ids per row, start token first
	hidden *onnx.Tensor
	mask   *onnx.Tensor
	past   map[string]*onnx.Tensor // merged decoder only; nil before the first step
}

// step runs the decoder once and returns each row's next-token logits.
func (m *seq2seq) step(ctx context.Context, st *decodeState) ([][]float32, error) {
	rows := int64(len(st.seqs))
	dec := m.decoder
	if m.withPast != nil && st.past != nil {
		dec = m.withPast
	}
	in := map[string]*onnx.Tensor{}
	if dec.HasInput("encoder_hidden_states") {
		in["encoder_hidden_states"] = st.hidden
	}
	if dec.HasInput("encoder_attention_mask") {
		in["encoder_attention_mask"] = st.mask
	}
	if m.cached() && st.past != nil {
		last := make([]int64, rows)
		for i, s := range st.seqs {
			last[i] = s[len(s)-1]
		}
		in["input_ids"] = onnx.NewInt64(last, rows, 1)
		if m.merged {
			in["use_cache_branch"] = onnx.NewBool([]bool{true}, 1)
		}
		for name, t := range st.past {
			in[name] = t
		}
	} else {
		n := int64(len(st.seqs[0]))
		ids := make([]int64, 0, rows*n)
		for _, s := range st.seqs {
			ids = append(ids, s...)
		}
		in["input_ids"] = onnx.NewInt64(ids, rows, n)
		if m.merged {
			in["use_cache_branch"] = onnx.NewBool([]bool{false}, 1)
			for _, info := range m.decoder.Inputs() {
				if strings.HasPrefix(info.Name, "past_key_values.") {
					in[info.Name] = onnx.NewFloat32(nil, rows, m.heads, 0, m.headDim)
				}
			}
		}
	}
	out, err := dec.Run(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("pipelines: decoder: %w", err)
	}
	if m.cached() {
		// The encoder's keys and values do not change after the first
		// step (the split layout's later decoder does not even output them).
		next := make(map[string]*onnx.Tensor, len(out))
		for name, t := range st.past {
			if strings.Contains(name, ".encoder.") {
				next[name] = t
			}
		}
		for name, t := range out {
			if !strings.HasPrefix(name, "present.") {
				continue
			}
			past := "past_key_values." + strings.TrimPrefix(name, "present.")
			if _, kept := next[past]; !kept {
				next[past] = t
			}
		}
		st.past = next
	}
	logits := out["logits"]
	if logits == nil || len(logits.Shape) != 3 || logits.Shape[0] != rows {
		return nil, fmt.Errorf("pipelines: decoder logits have shape %v", shapeOf(logits))
	}
	t, v := logits.Shape[1], logits.Shape[2]
	res := make([][]float32, rows)
	for r := range res {
		start := (int64(r)*t + t - 1) * v
		res[r] = logits.F32[start : start+v]
	}
	return res, nil
}

func shapeOf(t *onnx.Tensor) []int64 {
	if t == nil {
		return nil
	}
	return t.Shape
}

// gather keeps the rows listed (in that order, repeats allowed) in every piece of
// the state.
func (st *decodeState) gather(rows []int) {
	seqs := make([][]int64, len(rows))
	for i, r := range rows {
		seqs[i] = st.seqs[r]
	}
	st.seqs = seqs
	st.hidden = gatherRows(st.hidden, rows)
	st.mask = gatherRows(st.mask, rows)
	for name, t := range st.past {
		st.past[name] = gatherRows(t, rows)
	}
}

// gatherRows selects rows along the first axis into a new tensor.
func gatherRows(t *onnx.Tensor, rows []int) *onnx.Tensor {
	shape := append([]int64{int64(len(rows))}, t.Shape[1:]...)
	per := 1
	for _, d := range t.Shape[1:] {
		per *= int(d)
	}
	switch {
	case t.F32 != nil:
		out := make([]float32, 0, len(rows)*per)
		for _, r := range rows {
			out = append(out, t.F32[r*per:(r+1)*per]...)
		}
		return onnx.NewFloat32(out, shape...)
	default:
		out := make([]int64, 0, len(rows)*per)
		for _, r := range rows {
			out = append(out, t.I64[r*per:(r+1)*per]...)
		}
		return onnx.NewInt64(out, shape...)
	}
}

func (m *seq2seq) close() error {
	var err error
	for _, s := range []*onnx.Session{m.encoder, m.decoder, m.withPast} {
		if s != nil {
			if cerr := s.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
	}
	return err
}
