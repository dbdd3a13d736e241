package tokenizer

import "strings"

// Decode turns ids back into text. With skipSpecial, special tokens
// ([CLS], <s>, <|eot_id|>, ...) are left out. Ids outside the vocabulary
// decode as the unknown token.
func (t *Tokenizer) Decode(ids []int64, skipSpecial bool) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		tok := t.vocab.unk
		if id >= 0 && id < int64(len(t.vocab.tokens)) && t.vocab.tokens[id] != "" {
			tok = t.vocab.tokens[id]
		}
		if skipSpecial && t.special[tok] {
			continue
		}
		toks = append(toks, tok)
	}
	var s string
	if t.dec != nil {
		s = strings.Join(t.dec.decodeChain(toks), "")
	} else {
		s = strings.Join(toks, " ")
	}
	if t.eowSuffix != "" {
		s = strings.ReplaceAll(s, t.eowSuffix, " ")
		if skipSpecial {
			s = jsTrim(s)
		}
	}
	if t.cleanUp {
		s = cleanUpTokenization(s)
	}
	return s
}

// ID returns the id of a token string (vocabulary or added token).
func (t *Tokenizer) ID(token string) (int64, bool) {
	id, ok := t.vocab.ids[token]
	return id, ok
}

// Token returns the token string of an id.
func (t *Tokenizer) Token(id int64) (string, bool) {
	if id < 0 || id >= int64(len(t.vocab.tokens)) || t.vocab.tokens[id] == "" {
		return "", false
	}
	return t.vocab.tokens[id], true
}

// VocabSize is the number of ids, added tokens included.
func (t *Tokenizer) VocabSize() int { return len(t.vocab.tokens) }

// MaxLength is tokenizer_config.json's model_max_length, or 0 when it is
// missing or a "no limit" placeholder such as 1e30.
func (t *Tokenizer) MaxLength() int { return t.maxLength }

// PaddingSide is "right" or "left" (tokenizer_config.json padding_side,
// defaulting to left for Llama tokenizers as transformers.js does).
func (t *Tokenizer) PaddingSide() string { return t.paddingSide }

// specialToken returns the content named by the first present config key.
func (t *Tokenizer) specialToken(keys ...string) (string, bool) {
	for _, k := range keys {
		if s, ok := t.specialNames[k]; ok {
			return s, true
		}
	}
	return "", false
}

func (t *Tokenizer) specialID(keys ...string) (int64, bool) {
	s, ok := t.specialToken(keys...)
	if !ok {
		return 0, false
	}
	return t.ID(s)
}

// CLSID is the id of tokenizer_config.json's cls_token.
func (t *Tokenizer) CLSID() (int64, bool) { return t.specialID("cls_token") }

// SEPID is the id of sep_token.
func (t *Tokenizer) SEPID() (int64, bool) { return t.specialID("sep_token") }

// PadID is the id of pad_token, falling back to eos_token.
func (t *Tokenizer) PadID() (int64, bool) { return t.specialID("pad_token", "eos_token") }

// BOSID is the id of bos_token.
func (t *Tokenizer) BOSID() (int64, bool) { return t.specialID("bos_token") }

// EOSID is the id of eos_token.
func (t *Tokenizer) EOSID() (int64, bool) { return t.specialID("eos_token") }

// UNKID is the id of unk_token.
func (t *Tokenizer) UNKID() (int64, bool) { return t.specialID("unk_token") }

// MaskID is the id of mask_token.
func (t *Tokenizer) MaskID() (int64, bool) { return t.specialID("mask_token") }
