package engine

import (
	"fmt"
	"strings"

	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// Tokenize turns text into token ids. addSpecial adds the model's BOS (and
// EOS) tokens as its vocabulary asks; parseSpecial turns the text of control
// tokens such as <|im_start|> into those tokens instead of plain text (use it
// for rendered chat templates, not for user text).
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	if strings.IndexByte(text, 0) >= 0 {
		return nil, fmt.Errorf("%w: the text holds a NUL byte", ErrInvalidRequest)
	}
	m.life.RLock()
	defer m.life.RUnlock()
	if m.freed {
		return nil, ErrClosed
	}
	if text == "" && !addSpecial {
		return []int32{}, nil
	}
	toks := yz.Tokenize(m.vocab, text, addSpecial, parseSpecial)
	out := make([]int32, len(toks))
	for i, t := range toks {
		out[i] = int32(t)
	}
	return out, nil
}

// Detokenize turns token ids back into text. With renderSpecial the text of
// control tokens is included; otherwise they render as nothing. Invalid ids
// render as nothing.
func (m *Model) Detokenize(ids []int32, renderSpecial bool) (string, error) {
	m.life.RLock()
	defer m.life.RUnlock()
	if m.freed {
		return "", ErrClosed
	}
	toks := make([]yz.Token, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && int(id) < m.nVocab {
			toks = append(toks, yz.Token(id))
		}
	}
	return yz.Detokenize(m.vocab, toks, false, renderSpecial), nil
}

// TokenPiece is the text of one token as a generation streams it: raw bytes,
// which may be part of a UTF-8 character (byte tokens). Control tokens give
// "" unless renderSpecial.
func (m *Model) TokenPiece(id int32, renderSpecial bool) (string, error) {
	m.life.RLock()
	defer m.life.RUnlock()
	if m.freed {
		return "", ErrClosed
	}
	if id < 0 || int(id) >= m.nVocab {
		return "", fmt.Errorf("%w: token %d is outside the vocabulary of %d", ErrInvalidRequest, id, m.nVocab)
	}
	return m.piece(yz.Token(id), renderSpecial), nil
}

// piece renders one token; the caller holds m.life or is the scheduler.
func (m *Model) piece(t yz.Token, special bool) string {
	var small [64]byte
	n := yz.TokenToPiece(m.vocab, t, small[:], 0, special)
	if n >= 0 && int(n) <= len(small) {
		return string(small[:n])
	}
	if n < 0 {
		big := make([]byte, -n)
		if n = yz.TokenToPiece(m.vocab, t, big, 0, special); n >= 0 && int(n) <= len(big) {
			return string(big[:n])
		}
	}
	return ""
}

// IsEndOfGeneration reports whether id ends a generation (EOS, EOT and the
// like, e.g. <|im_end|>).
func (m *Model) IsEndOfGeneration(id int32) bool {
	m.life.RLock()
	defer m.life.RUnlock()
	if m.freed || id < 0 || int(id) >= m.nVocab {
		return false
	}
	return yz.VocabIsEOG(m.vocab, yz.Token(id))
}
