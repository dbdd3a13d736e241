package engine

import (
	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// stateDecoder is a decoder whose sequences' KV can be copied out and put
// back (the on-disk prompt cache, promptcache.go). Every method is called
// on the scheduler goroutine only.
type stateDecoder interface {
	// seqState is seq's KV as llama.cpp serializes it; nil when it could
	// not be read.
	seqState(seq int) []byte
	// setSeqState makes seq's KV the one state holds; false when llama.cpp
	// refused it (seq's KV is then dropped).
	setSeqState(seq int, state []byte) bool
}

var _ stateDecoder = (*llamaDecoder)(nil)

func (d *llamaDecoder) seqState(seq int) []byte {
	n := yz.StateSeqGetSize(d.lctx, yz.SeqId(seq))
	if n == 0 {
		return nil
	}
	buf := make([]byte, n)
	if got := yz.StateSeqGetData(d.lctx, buf, yz.SeqId(seq)); got != n {
		return nil
	}
	return buf
}

func (d *llamaDecoder) setSeqState(seq int, state []byte) bool {
	d.seqRemove(seq, -1)
	if yz.StateSeqSetData(d.lctx, state, yz.SeqId(seq)) != uint64(len(state)) {
		d.seqRemove(seq, -1)
		return false
	}
	return true
}
