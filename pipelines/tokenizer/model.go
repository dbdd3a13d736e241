package tokenizer

import (
	"encoding/json"
	"fmt"
)

// vocab is the token table shared by the model and the tokenizer. Added
// tokens are written into it after the model is built, so lookups made by
// the model (WordPiece pieces, BPE byte fallback, ...) see them too, as in
// the reference implementation.
type vocab struct {
	ids    map[string]int64
	tokens []string
	unkID  int64 // undefinedID when the model has no unknown token
	unk    string
	hasUnk bool
}

// undefinedID stands for JavaScript's undefined in the unknown-token logic.
const undefinedID = -2

func (v *vocab) set(tok string, id int64) {
	v.ids[tok] = id
	for int64(len(v.tokens)) <= id {
		v.tokens = append(v.tokens, "")
	}
	v.tokens[id] = tok
}

// lookup returns the id of tok, or undefinedID.
func (v *vocab) lookup(tok string) int64 {
	if id, ok := v.ids[tok]; ok {
		return id
	}
	return undefinedID
}

// model turns pre-tokenized words into tokens.
type model interface {
	tokenize(ru *run, words []string) []string
}

// newModel builds the model and its vocabulary from tokenizer.json "model".
func newModel(raw json.RawMessage) (model, *vocab, error) {
	if isNull(raw) {
		return nil, nil, fmt.Errorf("tokenizer.json has no model")
	}
	var probe struct {
		Type                    string          `json:"type"`
		Vocab                   json.RawMessage `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
		ContinuingSubwordPrefix json.RawMessage `json:"continuing_subword_prefix"`
		UnkToken                json.RawMessage `json:"unk_token"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	}
	typ := probe.Type
	if typ == "" && len(probe.Vocab) > 0 {
		// Older files omit the type; infer it the way the reference does.
		switch {
		case probe.Vocab[0] == '[':
			typ = "Unigram"
		case probe.ContinuingSubwordPrefix != nil && probe.UnkToken != nil && probe.Merges != nil:
			typ = "BPE"
		case probe.ContinuingSubwordPrefix != nil && probe.UnkToken != nil:
			typ = "WordPiece"
		}
	}
	switch typ {
	case "WordPiece":
		return newWordPiece(raw)
	case "BPE":
		return newBPE(raw)
	case "Unigram":
		return newUnigram(raw)
	}
	return nil, nil, fmt.Errorf("unknown model type %q", probe.Type)
}

func vocabFromMap(m map[string]int64, unk *string) *vocab {
	v := &vocab{ids: make(map[string]int64, len(m)), unkID: undefinedID}
	for tok, id := range m {
		v.set(tok, id)
	}
	if unk != nil {
		v.unk = *unk
		if id, ok := v.ids[*unk]; ok {
			v.unkID, v.hasUnk = id, true
		}
	}
	return v
}

// fuseUnknown merges runs of unknown tokens into one, exactly as the
// reference does (including its rule that a literal unknown token absorbs
// nothing after it).
func fuseUnknown(toks []string, v *vocab) []string {
	var out []string
	effective := func(t string) int64 {
		if id, ok := v.ids[t]; ok {
			return id
		}
		return v.unkID
	}
	for i := 0; i < len(toks); {
		out = append(out, toks[i])
		if effective(toks[i]) != v.unkID {
			i++
			continue
		}
		for i++; i < len(toks) && effective(toks[i]) == v.unkID; i++ {
			if v.lookup(out[len(out)-1]) != v.unkID {
				out[len(out)-1] += toks[i]
			}
		}
	}
	return out
}

type wordPiece struct {
	v        *vocab
	prefix   string
	maxChars int
	fuseUnk  bool
}

func newWordPiece(raw json.RawMessage) (model, *vocab, error) {
	var c struct {
		Vocab     map[string]int64 `json:"vocab"`
		Unk       *string          `json:"unk_token"`
		Prefix    string           `json:"continuing_subword_prefix"`
		MaxChars  *int             `json:"max_input_chars_per_word"`
		FuseUnk   bool             `json:"fuse_unk"`
		ByteFallb bool             `json:"byte_fallback"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, nil, fmt.Errorf("WordPiece: %w", err)
	}
	if len(c.Vocab) > MaxVocab {
		return nil, nil, fmt.Errorf("WordPiece: %d vocabulary entries, more than %d", len(c.Vocab), MaxVocab)
	}
	v := vocabFromMap(c.Vocab, c.Unk)
	m := &wordPiece{v: v, prefix: c.Prefix, maxChars: 100, fuseUnk: c.FuseUnk}
	if c.MaxChars != nil {
		m.maxChars = *c.MaxChars
	}
	if m.maxChars > MaxWordPieceChars {
		return nil, nil, fmt.Errorf("WordPiece: max_input_chars_per_word %d is more than %d", m.maxChars, MaxWordPieceChars)
	}
	return m, v, nil
}

func (m *wordPiece) tokenize(ru *run, words []string) []string {
	var out []string
	var buf []byte
	var starts []int
	for _, w := range words {
		ru.tick(1 + len(w)/16)
		starts = starts[:0]
		for i := range w {
			starts = append(starts, i)
		}
		n := len(starts)
		if n > m.maxChars {
			out = append(out, m.v.unk)
			continue
		}
		starts = append(starts, len(w))
		mark := len(out)
		unknown := false
		for s := 0; s < n; {
			found := -1
			for e := n; e > s; e-- {
				buf = buf[:0]
				if s > 0 {
					buf = append(buf, m.prefix...)
				}
				buf = append(buf, w[starts[s]:starts[e]]...)
				if _, ok := m.v.ids[string(buf)]; ok {
					found = e
					break
				}
			}
			if found < 0 {
				unknown = true
				break
			}
			out = append(out, string(buf))
			s = found
		}
		if unknown {
			out = append(out[:mark], m.v.unk)
		}
	}
	if m.fuseUnk {
		out = fuseUnknown(out, m.v)
	}
	return out
}
