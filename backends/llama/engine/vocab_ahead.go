package engine

import yz "github.com/hybridgroup/yzma/pkg/llama"

// The tables over the whole vocabulary that a grammar's first draw needs
// (every token's piece, control tokens as text, and the UTF-8 guard's
// classes of them, utf8guard.go) take a call into llama.cpp per token:
// about 0.1 s with a 152k-token vocabulary, which the first turn after a
// load paid. They are made on another goroutine while llama.cpp allocates
// and clears the KV cache, and the decoder takes them on first use.

// vocabTables are the decoder's whole-vocabulary tables.
type vocabTables struct {
	pieces [][]byte // by token id, as lazyWatch.piece renders them
	u8v    *utf8Vocab
}

// renderVocab makes m's tables. llama.cpp's token_to_piece only reads the
// vocabulary, so it runs beside the context's creation.
func renderVocab(m *Model) vocabTables {
	pieces := make([][]byte, m.nVocab)
	for t := range pieces {
		p := []byte(m.piece(yz.Token(t), true))
		if len(p) == 0 {
			p = []byte{}
		}
		pieces[t] = p
	}
	return vocabTables{pieces: pieces, u8v: newUTF8Vocab(m.nVocab, func(t yz.Token) []byte { return pieces[t] })}
}

// startVocab starts renderVocab; the channel gives its result once.
func startVocab(m *Model) chan vocabTables {
	ch := make(chan vocabTables, 1)
	go func() { ch <- renderVocab(m) }()
	return ch
}

// take installs the tables made ahead, waiting for them; a no-op once done
// or when none are being made. The decoder calls it before it frees its
// model's state, so the goroutine never outlives the vocabulary.
func (w *lazyWatch) take() {
	if w.ahead == nil {
		return
	}
	t := <-w.ahead
	w.ahead = nil
	if w.pieces == nil {
		w.pieces = t.pieces
	}
	if w.u8v == nil {
		w.u8v = t.u8v
	}
}
