package pipelines

import (
	"math"
	"slices"
)

// genSettings are the resolved generation settings of one Summarize call.
type genSettings struct {
	start         int64   // decoder start token
	eos           []int64 // end-of-sequence tokens
	pad           int64
	maxLength     int // decoder length limit, start token included
	minLength     int // EOS is banned while the decoder ids are shorter
	minNewTokens  int // EOS is banned while fewer tokens were generated
	numBeams      int
	lengthPenalty float64
	early         EarlyStopping
	noRepeat      int
	forcedBOS     *int64
	forcedEOS     []int64
}

func (g *genSettings) isEOS(tok int64) bool { return slices.Contains(g.eos, tok) }

// processLogits applies the logits processors transformers.js applies, in its
// order, to one row's next-token scores (raw logits for greedy search,
// log-probabilities for beam search): no_repeat_ngram_size, min_length,
// min_new_tokens, forced_bos_token_id, forced_eos_token_id. seq is the row's
// decoder ids so far (start token included).
func (g *genSettings) processLogits(seq []int64, scores []float64) {
	inf := math.Inf(-1)
	if g.noRepeat > 0 {
		for _, tok := range bannedNgramTokens(seq, g.noRepeat) {
			scores[tok] = inf
		}
	}
	if len(g.eos) > 0 {
		if len(seq) < g.minLength || len(seq)-1 < g.minNewTokens {
			for _, e := range g.eos {
				scores[e] = inf
			}
		}
	}
	if g.forcedBOS != nil && len(seq) == 1 {
		only(scores, *g.forcedBOS)
	}
	if len(g.forcedEOS) > 0 && len(seq) == g.maxLength-1 {
		only(scores, g.forcedEOS...)
	}
}

// only leaves the given tokens at 0 and bans every other token.
func only(scores []float64, keep ...int64) {
	for i := range scores {
		scores[i] = math.Inf(-1)
	}
	for _, k := range keep {
		scores[k] = 0
	}
}

// bannedNgramTokens lists the tokens that would repeat an n-gram already in seq:
// every token that followed an earlier occurrence of seq's last n-1 tokens.
func bannedNgramTokens(seq []int64, n int) []int64 {
	if len(seq)+1 < n {
		return nil
	}
	prefix := seq[len(seq)-(n-1):]
	var banned []int64
	for j := 0; j+n <= len(seq); j++ {
		if slices.Equal(seq[j:j+n-1], prefix) {
			banned = append(banned, seq[j+n-1])
		}
	}
	return banned
}

// beamHyps keeps the best num_beams finished hypotheses of one text.
type beamHyps struct {
	n             int
	lengthPenalty float64
	early         EarlyStopping
	maxLength     int
	hyps          []beamHyp
	worst         float64
}

type beamHyp struct {
	score float64
	seq   []int64 // decoder ids, start token included, EOS excluded
	eos   bool    // finished with EOS (else cut at max length)
}

func newBeamHyps(g *genSettings) *beamHyps {
	return &beamHyps{n: g.numBeams, lengthPenalty: g.lengthPenalty, early: g.early, maxLength: g.maxLength, worst: 1e9}
}

// add offers a hypothesis with its summed log-probability; its score is
// sumLogprobs / len(seq)^length_penalty.
func (h *beamHyps) add(seq []int64, sumLogprobs float64, eos bool) {
	score := sumLogprobs / math.Pow(float64(len(seq)), h.lengthPenalty)
	if len(h.hyps) >= h.n && score <= h.worst {
		return
	}
	h.hyps = append(h.hyps, beamHyp{score: score, seq: slices.Clone(seq), eos: eos})
	if len(h.hyps) > h.n {
		worst := 0
		for i, x := range h.hyps {
			if x.score < h.hyps[worst].score {
				worst = i
			}
		}
		h.hyps = slices.Delete(h.hyps, worst, worst+1)
		h.worst = math.Inf(1)
		for _, x := range h.hyps {
			h.worst = math.Min(h.worst, x.score)
		}
	} else {
		h.worst = math.Min(score, h.worst)
	}
}

// done says whether no running beam can improve the kept hypotheses, given the best
// running summed log-probability at decoder length curLen.
func (h *beamHyps) done(bestSum float64, curLen int) bool {
	if len(h.hyps) < h.n {
		return false
	}
	switch h.early {
	case EarlyStoppingTrue:
		return true
	case EarlyStoppingNever:
		l := curLen
		if h.lengthPenalty > 0 {
			l = h.maxLength
		}
		return h.worst >= bestSum/math.Pow(float64(l), h.lengthPenalty)
	default:
		return h.worst >= bestSum/math.Pow(float64(curLen), h.lengthPenalty)
	}
}

// best is the highest-scoring hypothesis (the later one on a tie).
func (h *beamHyps) best() beamHyp {
	b := h.hyps[0]
	for _, x := range h.hyps[1:] {
		if x.score >= b.score {
			b = x
		}
	}
	return b
}

// candidate is one (beam, token) extension with its summed log-probability.
type candidate struct {
	score float64
	beam  int
	token int64
}

// topCandidates returns the k best extensions over all beams of one text, best
// first; ties go to the lower beam, then the lower token.
func topCandidates(scores [][]float64, k int) []candidate {
	var top []candidate
	for b, row := range scores {
		for tok, s := range row {
			if math.IsInf(s, -1) && len(top) >= k {
				continue
			}
			c := candidate{score: s, beam: b, token: int64(tok)}
			if len(top) == k && !better(c, top[k-1]) {
				continue
			}
			i, _ := slices.BinarySearchFunc(top, c, func(a, c candidate) int {
				if better(a, c) {
					return -1
				}
				return 1
			})
			top = slices.Insert(top, i, c)
			if len(top) > k {
				top = top[:k]
			}
		}
	}
	return top
}

func better(a, b candidate) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if a.beam != b.beam {
		return a.beam < b.beam
	}
	return a.token < b.token
}
