package engine

import (
	"fmt"

	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// mediaDecoder is a decoder that evaluates prompts with images (the llama
// decoder of a model with a projector).
type mediaDecoder interface {
	// evalMedia evaluates mp into seq from position 0, the prompt's last
	// token with logits; it returns the next position and the index to
	// sample the first token from.
	evalMedia(seq int, mp *mediaPrompt) (pos int, logit int32, err error)
}

// noImageKV fills a slot's cache where a prompt with images stands: no
// prompt token is ever this id, so nothing of it is reused.
const noImageKV yz.Token = -1

// startMedia gives r, a prompt with images, to sl and evaluates the whole
// prompt at once (see vision.go): whatever sl's KV held is dropped (saved
// to the disk cache first, as any evicted prefix), nothing of the new KV
// counts as reusable, and the first token is sampled here. The scheduler
// goroutine is taken for the evaluation, and the other sequences wait that
// long.
func (s *scheduler) startMedia(sl *slot, r *request) {
	defer r.media.release()
	s.keepDropped(sl, 0)
	s.dec.seqRemove(sl.id, -1)
	sl.cache, sl.exact, sl.answer = sl.cache[:0], 0, pendingAnswer{}
	s.clock++
	sl.used, sl.base = s.clock, s.floor
	sl.r = r
	sl.nPast = len(r.prompt)
	sl.hasNext = false
	s.startSampler(sl, r)
	sl.text = newTextAssembler(r.stops)
	sl.usage = Usage{PromptTokens: len(r.prompt)}
	s.prefixQueried.Add(uint64(len(r.prompt)))
	s.active.Add(1)
	md, ok := s.dec.(mediaDecoder)
	if !ok {
		s.finish(sl, FinishError, fmt.Errorf("%w: this decoder reads no images", ErrDecode), false)
		return
	}
	pos, logit, err := md.evalMedia(sl.id, r.media)
	s.decodeCalls.Add(1)
	s.decodedTokens.Add(uint64(len(r.prompt)))
	if err != nil {
		s.dec.seqRemove(sl.id, -1)
		s.finish(sl, FinishError, err, false)
		return
	}
	for range pos {
		sl.cache = append(sl.cache, noImageKV)
	}
	s.noteKV()
	tok, lp := s.sampleSlot(sl, logit)
	s.onToken(sl, tok, lp)
}

// evalMedia runs mp's text through llama_decode, nBatch tokens a step,
// and each image through the multimodal library.
func (d *llamaDecoder) evalMedia(seq int, mp *mediaPrompt) (int, int32, error) {
	if d.m.vis == nil {
		return 0, 0, fmt.Errorf("%w: the model has no projector loaded", ErrDecode)
	}
	pos, logit := 0, int32(-1)
	batch := make([]batchToken, 0, d.nBatch)
	for k, pc := range mp.pieces {
		last := k == len(mp.pieces)-1
		if pc.unit != nil {
			next, err := d.m.vis.eval(d.lctx, pc.unit, pos, seq, d.nBatch, last)
			if err != nil {
				return 0, 0, err
			}
			pos, logit = next, -1 // the last output of the library's last decode
			continue
		}
		for off := 0; off < len(pc.tokens); off += d.nBatch {
			end := min(off+d.nBatch, len(pc.tokens))
			batch = batch[:0]
			for i := off; i < end; i++ {
				batch = append(batch, batchToken{tok: pc.tokens[i], pos: pos + i, seq: seq, logits: last && i == len(pc.tokens)-1})
			}
			if err := d.decode(batch); err != nil {
				return 0, 0, err
			}
			if last && end == len(pc.tokens) {
				logit = int32(len(batch) - 1)
			}
		}
		pos += len(pc.tokens)
	}
	return pos, logit, nil
}
