package engine

import (
	"context"
	"slices"
	"unicode/utf8"
)

// Long texts are tokenized in pieces, so that a tokenization stops when its
// caller goes away: one llama_tokenize call cannot be interrupted, and a text
// of 16 MB takes it seconds to tens of seconds. The pieces are cut only where
// the result is the same as for the whole text: after a newline and before
// an ASCII letter, where every pre-tokenizer llama.cpp has starts a new word
// and no merge crosses, and only where tokenizing the text around the cut
// gives the same ids as tokenizing its two sides (a vocabulary that adds a
// space prefix to each call, SentencePiece's, fails that check, and its
// texts are then tokenized whole).
const (
	// chunkedMin is the text size from which a text is tokenized in pieces.
	chunkedMin = 1 << 20
	// chunkSize is the size of a piece (the cut comes at the first good
	// place after it, looked for over a quarter of that).
	chunkSize = 256 << 10
	// cutTries bounds how many places are checked before the rest goes
	// whole.
	cutTries = 8
	// cutWindow is the text on each side of a cut that the check tokenizes.
	cutWindow = 256
)

// tokenizeChunked is Tokenize of a long text, checking ctx between pieces.
func (m *Model) tokenizeChunked(ctx context.Context, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return m.tokenizePieces(ctx, text, addSpecial, parseSpecial, chunkSize)
}

// tokenizePieces is tokenizeChunked with pieces of about size bytes.
func (m *Model) tokenizePieces(ctx context.Context, text string, addSpecial, parseSpecial bool, size int) ([]int32, error) {
	prefix, suffix, ok, err := m.specialEnds(addSpecial)
	if err != nil || !ok {
		if err == nil {
			return m.Tokenize(text, addSpecial, parseSpecial)
		}
		return nil, err
	}
	out := slices.Clone(prefix)
	for text != "" {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cut, err := m.nextCut(text, size, parseSpecial)
		if err != nil {
			return nil, err
		}
		ids, err := m.Tokenize(text[:cut], false, parseSpecial)
		if err != nil {
			return nil, err
		}
		out = append(out, ids...)
		text = text[cut:]
		if h := m.sch.hooks.TokenizedPiece; h != nil {
			h(cut)
		}
	}
	return append(out, suffix...), nil
}

// specialEnds returns the ids that addSpecial puts before and after a text
// (BOS, EOS), read from a probe; ok is false when they are not simply around
// it.
func (m *Model) specialEnds(addSpecial bool) (prefix, suffix []int32, ok bool, err error) {
	if !addSpecial {
		return nil, nil, true, nil
	}
	const probe = "a"
	with, err := m.Tokenize(probe, true, false)
	if err != nil {
		return nil, nil, false, err
	}
	without, err := m.Tokenize(probe, false, false)
	if err != nil {
		return nil, nil, false, err
	}
	for i := 0; i+len(without) <= len(with); i++ {
		if slices.Equal(with[i:i+len(without)], without) {
			return with[:i], with[i+len(without):], true, nil
		}
	}
	return nil, nil, false, nil
}

// nextCut is where the next piece of text ends: a checked cut after size
// bytes, or the end of the text.
func (m *Model) nextCut(text string, size int, parseSpecial bool) (int, error) {
	search := size / 4
	if len(text) < size+search {
		return len(text), nil
	}
	tries := 0
	for i := size; i < size+search && tries < cutTries; i++ {
		if text[i-1] != '\n' || !isASCIILetter(text[i]) {
			continue
		}
		tries++
		same, err := m.cutKeepsIDs(text, i, parseSpecial)
		if err != nil {
			return 0, err
		}
		if same {
			return i, nil
		}
	}
	return len(text), nil
}

// cutKeepsIDs reports whether the text around cut tokenizes to the same ids
// whole as in two pieces split at cut.
func (m *Model) cutKeepsIDs(text string, cut int, parseSpecial bool) (bool, error) {
	lo, hi := max(0, cut-cutWindow), min(len(text), cut+cutWindow)
	for lo > 0 && !utf8.RuneStart(text[lo]) {
		lo--
	}
	for hi < len(text) && !utf8.RuneStart(text[hi]) {
		hi++
	}
	whole, err := m.Tokenize(text[lo:hi], false, parseSpecial)
	if err != nil {
		return false, err
	}
	left, err := m.Tokenize(text[lo:cut], false, parseSpecial)
	if err != nil {
		return false, err
	}
	right, err := m.Tokenize(text[cut:hi], false, parseSpecial)
	if err != nil {
		return false, err
	}
	return slices.Equal(whole, append(left, right...)), nil
}

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
