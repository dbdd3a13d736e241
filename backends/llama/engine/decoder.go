package engine

import (
	"fmt"

	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// decoder is what the scheduler needs of llama.cpp: decode a batch, sample
// a sequence, drop KV, and read the vocabulary. The scheduler holds the
// coordination (admission, the queue limit, cancellation, batching order);
// the decoder holds the native state. Tests drive the scheduler with a fake
// decoder, without libllama. Every method is called on the scheduler
// goroutine only.
type decoder interface {
	// decode evaluates one batch; it fails as a whole.
	decode(batch []batchToken) error
	// sample draws the next token of seq from the logits of batch index i
	// of the last decode.
	sample(seq int, i int32) yz.Token
	// startSeq gives seq a sampler for samp, under grammar when it is not
	// the zero constraint; endSeq frees it.
	startSeq(seq int, samp Sampling, grammar constraint)
	endSeq(seq int)
	// seqRemove drops seq's KV from position from on (-1: all of it); false
	// when the backend could not drop a partial range.
	seqRemove(seq int, from int) bool
	// seqCopy makes dst's KV a copy of src's, all of it (the copy is made
	// before the next decode); an error leaves dst's KV unknown.
	seqCopy(src, dst int) error
	isEOG(tok yz.Token) bool
	piece(tok yz.Token) string
	// close frees the native state; the decoder is not used after.
	close()
}

// batchToken is one token of a decode step.
type batchToken struct {
	tok    yz.Token
	pos    int
	seq    int
	logits bool
}

// llamaDecoder is the decoder over one llama context.
type llamaDecoder struct {
	m     *Model
	lctx  yz.Context
	mem   yz.Memory
	batch yz.Batch
	smpl  []seqSampler   // by sequence (constrain.go)
	lp    []seqSampler   // by sequence: the sampler of one that reports logprobs
	cur   []yz.TokenData // candidates and their shaped logits (logprobs.go), by token id
	kept  []yz.TokenData // the candidates a rejected draw had (constrain.go)
	asked []yz.TokenData // the tokens put to a grammar at once (constrain_mask.go)
	// allowed is a grammar's verdict by token, forest the vocabulary by
	// prefix, read on first use (constrain_mask.go).
	allowed []bool
	forest  *pieceForest
	// maskFirst samples under a grammar in the reference order, the
	// grammar over every candidate first (constrain.go; tests only).
	maskFirst bool
	shaped    []float32
	nCtx      int
	nBatch    int // the batch's capacity
	seqIDs    [][]yz.SeqId
	lazy      lazyWatch  // lazy grammars' triggers (toolcalls_lazy.go)
	u8        []utf8Seq  // by sequence: the UTF-8 guard under a grammar (utf8guard.go)
	u8v       *utf8Vocab // the vocabulary's UTF-8 shape, read on first use
	u8keep    []float32
	pools     []yz.Threadpool // the context's CPU thread pools (threads.go), freed after it
}

var _ decoder = (*llamaDecoder)(nil)

func newLlamaDecoder(m *Model, o Options, nBatch, ctxSize int) (*llamaDecoder, error) {
	cp := yz.ContextDefaultParams()
	// llama.cpp pads the context to a multiple of 256 and splits it evenly
	// between the sequences; padding each sequence's share keeps both exact.
	cp.NCtx = uint32((ctxSize + 255) / 256 * 256 * o.Slots)
	cp.NBatch = uint32(nBatch)
	cp.NUbatch = uint32(nBatch)
	cp.NSeqMax = uint32(o.Slots)
	cp.NThreads = int32(o.Threads)
	cp.NThreadsBatch = int32(o.BatchThreads)
	cp.KVUnified = 0 // one KV stream per sequence: a sequence's attention never sees the others
	cp.NoPerf = 1
	if m.info.GPULayers == 0 {
		cp.OpOffload = 0
	}
	lctx, err := yz.InitFromModel(m.model, cp)
	if err != nil {
		return nil, fmt.Errorf("llama: create context of %d x %d tokens: %w", o.Slots, ctxSize, err)
	}
	if got := int(yz.NCtxSeq(lctx)); got < ctxSize {
		_ = yz.Free(lctx)
		return nil, fmt.Errorf("llama: context gives %d tokens per sequence, want %d", got, ctxSize)
	}
	pools := attachThreadpools(lctx, o.Threads, o.BatchThreads)
	mem, err := yz.GetMemory(lctx)
	if err != nil {
		_ = yz.Free(lctx)
		freeThreadpools(pools)
		return nil, fmt.Errorf("llama: context memory: %w", err)
	}
	d := &llamaDecoder{m: m, lctx: lctx, mem: mem, batch: yz.BatchInit(int32(nBatch), 0, 1),
		smpl: make([]seqSampler, o.Slots), lp: make([]seqSampler, o.Slots), nCtx: ctxSize, nBatch: nBatch, pools: pools}
	for i := 0; i < o.Slots; i++ {
		d.seqIDs = append(d.seqIDs, []yz.SeqId{yz.SeqId(i)})
	}
	return d, nil
}

func (d *llamaDecoder) decode(batch []batchToken) error {
	_ = d.batch.Clear()
	for _, t := range batch {
		// Capacity is checked when the batch is built, so Add cannot fail.
		_ = d.batch.Add(t.tok, yz.Pos(t.pos), d.seqIDs[t.seq], t.logits)
	}
	ret, err := yz.Decode(d.lctx, d.batch)
	if err != nil || ret != 0 {
		return fmt.Errorf("%w: llama_decode returned %d (%v)", ErrDecode, ret, err)
	}
	return nil
}

func (d *llamaDecoder) sample(seq int, i int32) yz.Token {
	d.guard(seq, i)
	var tok yz.Token
	if ss := &d.smpl[seq]; ss.chain != 0 {
		tok = yz.SamplerSample(ss.chain, d.lctx, i)
	} else {
		tok = d.sampleFirst(ss, i)
	}
	d.lazyAccept(seq, tok)
	d.guardAccept(seq, tok)
	return tok
}

func (d *llamaDecoder) startSeq(seq int, samp Sampling, grammar constraint) {
	d.guardStart(seq, grammar)
	d.smpl[seq] = newSeqSampler(samp, d.m.vocab, d.lazyStart(seq, grammar), d.m.nVocab, d.nCtx, d.maskFirst)
}

func (d *llamaDecoder) endSeq(seq int) {
	d.endLogprobs(seq)
	d.smpl[seq].free()
}

func (d *llamaDecoder) seqRemove(seq int, from int) bool {
	ok, err := yz.MemorySeqRm(d.mem, yz.SeqId(seq), yz.Pos(from), -1)
	return err == nil && ok
}

func (d *llamaDecoder) seqCopy(src, dst int) error {
	// Each sequence has its own KV stream (KVUnified 0): llama.cpp copies
	// a whole stream, which is what a full-range copy asks for.
	if err := yz.MemorySeqCp(d.mem, yz.SeqId(src), yz.SeqId(dst), -1, -1); err != nil {
		return fmt.Errorf("llama_memory_seq_cp %d -> %d: %w", src, dst, err)
	}
	return nil
}

func (d *llamaDecoder) isEOG(tok yz.Token) bool   { return yz.VocabIsEOG(d.m.vocab, tok) }
func (d *llamaDecoder) piece(tok yz.Token) string { return d.m.piece(tok, false) }

func (d *llamaDecoder) close() {
	d.lazy.take() // the goroutine rendering the vocabulary ends first
	for i := range d.smpl {
		d.endSeq(i)
	}
	_ = yz.BatchFree(d.batch)
	_ = yz.Free(d.lctx)
	freeThreadpools(d.pools)
}
