package pipelines

import (
	"context"
	"fmt"

	"github.com/modeld/modeld/backends/onnx"
)

// greedy picks the highest-scoring token at each step after the logits
// processors, as transformers.js does; a text's row leaves the batch once it has
// generated EOS or reached the length limit.
func (s *Summarizer) greedy(ctx context.Context, gs *genSettings, hidden, mask *onnx.Tensor, onToken func(TokenEvent) error) ([]Summary, error) {
	n := len(hidden.Shape)
	if n == 0 {
		return nil, fmt.Errorf("pipelines: empty encoder output")
	}
	texts := int(hidden.Shape[0])
	st := &decodeState{seqs: make([][]int64, texts), hidden: hidden, mask: mask}
	active := make([]int, texts) // row -> text
	for i := range active {
		st.seqs[i] = []int64{gs.start}
		active[i] = i
	}
	out := make([]Summary, texts)
	streamed := make([]string, texts)
	for len(active) > 0 {
		logits, err := s.m.step(ctx, st)
		if err != nil {
			return nil, err
		}
		var keep []int
		for r, row := range logits {
			scores := make([]float64, len(row))
			for i, x := range row {
				scores[i] = float64(x)
			}
			gs.processLogits(st.seqs[r], scores)
			tok := int64(argmax64(scores))
			st.seqs[r] = append(st.seqs[r], tok)
			text := active[r]
			if onToken != nil {
				sum := finishedSummary(st.seqs[r], gs)
				full := s.m.files.tok.Decode(sum.TokenIDs, true)
				ev := TokenEvent{Index: text, TokenID: tok, Text: streamDelta(streamed[text], full)}
				streamed[text] += ev.Text
				if err := onToken(ev); err != nil {
					return nil, err
				}
			}
			if gs.isEOS(tok) || len(st.seqs[r]) >= gs.maxLength {
				out[text] = finishedSummary(st.seqs[r], gs)
				continue
			}
			keep = append(keep, r)
		}
		if len(keep) < len(active) && len(keep) > 0 {
			next := make([]int, len(keep))
			for i, r := range keep {
				next[i] = active[r]
			}
			st.gather(keep)
			active = next
		} else if len(keep) == 0 {
			active = nil
		}
	}
	return out, nil
}

func argmax64(x []float64) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// beam runs beam search with the semantics of Hugging Face transformers'
// BeamSearchScorer: scores are summed log-probabilities (log-softmax, then the
// logits processors); each step keeps the 2×num_beams best extensions of each
// text, an EOS among its first num_beams becomes a finished hypothesis scored
// sum / length^length_penalty (length counts the decoder start token, not the
// EOS), the others continue; early_stopping decides when a text is done. Sums are
// kept in float64.
func (s *Summarizer) beam(ctx context.Context, gs *genSettings, hidden, mask *onnx.Tensor) ([]Summary, error) {
	texts, k := int(hidden.Shape[0]), gs.numBeams
	rows := make([]int, 0, texts*k)
	for t := range texts {
		for range k {
			rows = append(rows, t)
		}
	}
	st := &decodeState{seqs: make([][]int64, texts), hidden: hidden, mask: mask}
	for i := range st.seqs {
		st.seqs[i] = []int64{gs.start}
	}
	st.gather(rows)
	beamScores := make([]float64, len(rows))
	for r := range beamScores {
		if r%k != 0 {
			beamScores[r] = -1e9 // only the first beam is live at the start
		}
	}
	hyps := make([]*beamHyps, texts)
	for i := range hyps {
		hyps[i] = newBeamHyps(gs)
	}
	active := make([]int, texts) // block of k rows -> text
	for i := range active {
		active[i] = i
	}
	for {
		curLen := len(st.seqs[0])
		logits, err := s.m.step(ctx, st)
		if err != nil {
			return nil, err
		}
		var nextRows []int
		var nextScores []float64
		var nextTokens []int64
		var stillActive []int
		for bi, text := range active {
			scores := make([][]float64, k)
			for b := range k {
				r := bi*k + b
				lp := logSoftmax(logits[r])
				gs.processLogits(st.seqs[r], lp)
				for i := range lp {
					lp[i] += beamScores[r]
				}
				scores[b] = lp
			}
			cands := topCandidates(scores, 2*k)
			var rowsT []int
			var scoresT []float64
			var toksT []int64
			for rank, c := range cands {
				if gs.isEOS(c.token) {
					if rank < k {
						hyps[text].add(st.seqs[bi*k+c.beam], c.score, true)
					}
					continue
				}
				rowsT = append(rowsT, bi*k+c.beam)
				scoresT = append(scoresT, c.score)
				toksT = append(toksT, c.token)
				if len(rowsT) == k {
					break
				}
			}
			if len(rowsT) < k {
				return nil, fmt.Errorf("pipelines: beam search found fewer than %d live extensions", k)
			}
			if hyps[text].done(cands[0].score, curLen) {
				continue
			}
			if curLen+1 >= gs.maxLength {
				// The length limit ends the text: its beams become hypotheses.
				for b := range k {
					seq := append(append([]int64(nil), st.seqs[rowsT[b]]...), toksT[b])
					hyps[text].add(seq, scoresT[b], false)
				}
				continue
			}
			stillActive = append(stillActive, text)
			nextRows = append(nextRows, rowsT...)
			nextScores = append(nextScores, scoresT...)
			nextTokens = append(nextTokens, toksT...)
		}
		if len(stillActive) == 0 {
			break
		}
		st.gather(nextRows)
		for i := range st.seqs {
			st.seqs[i] = append(append([]int64(nil), st.seqs[i]...), nextTokens[i])
		}
		beamScores, active = nextScores, stillActive
	}
	out := make([]Summary, texts)
	for t, h := range hyps {
		best := h.best()
		out[t] = Summary{TokenIDs: append([]int64(nil), best.seq[1:]...), FinishReason: "length"}
		if best.eos {
			out[t].FinishReason = gs.eosFinish(len(best.seq) + 1)
		}
	}
	return out, nil
}
