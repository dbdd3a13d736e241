package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
)

// decoder rewrites the token strings on the way back to text; Decode joins
// what the chain returns.
type decoder interface {
	decodeChain(toks []string) []string
}

// decoderEnv is what some decoders need from the tokenizer.
type decoderEnv struct {
	added map[string]bool // contents of all added tokens
}

func newDecoder(raw json.RawMessage, env *decoderEnv) (decoder, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := componentType(raw)
	if err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	switch typ {
	case "ByteLevel":
		return byteLevelDec{env: env}, nil
	case "WordPiece":
		var c struct {
			Prefix  string `json:"prefix"`
			Cleanup bool   `json:"cleanup"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("decoder WordPiece: %w", err)
		}
		return wordPieceDec{prefix: c.Prefix, cleanup: c.Cleanup}, nil
	case "Metaspace":
		var c struct {
			Replacement *string `json:"replacement"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("decoder Metaspace: %w", err)
		}
		d := metaspaceDec{replacement: "\u2581"}
		if c.Replacement != nil {
			d.replacement = *c.Replacement
		}
		return d, nil
	case "BPEDecoder":
		var c struct {
			Suffix string `json:"suffix"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("decoder BPEDecoder: %w", err)
		}
		return bpeDec{suffix: c.Suffix}, nil
	case "Sequence":
		var c struct {
			Decoders []json.RawMessage `json:"decoders"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("decoder Sequence: %w", err)
		}
		var seq decSequence
		for i, r := range c.Decoders {
			d, err := newDecoder(r, env)
			if err != nil {
				return nil, fmt.Errorf("decoder Sequence[%d]: %w", i, err)
			}
			if d == nil {
				return nil, fmt.Errorf("decoder Sequence[%d]: null decoder", i)
			}
			seq = append(seq, d)
		}
		return seq, nil
	case "Replace":
		var c struct {
			Pattern json.RawMessage `json:"pattern"`
			Content string          `json:"content"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("decoder Replace: %w", err)
		}
		p, err := newPattern(c.Pattern, false)
		if err != nil {
			return nil, fmt.Errorf("decoder Replace: %w", err)
		}
		return replaceDec{p: p, content: c.Content}, nil
	case "Fuse":
		return fuseDec{}, nil
	case "Strip":
		var c struct {
			Content string `json:"content"`
			Start   int    `json:"start"`
			Stop    int    `json:"stop"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("decoder Strip: %w", err)
		}
		return stripDec{content: c.Content, start: c.Start, stop: c.Stop}, nil
	case "ByteFallback":
		return byteFallbackDec{}, nil
	}
	return nil, fmt.Errorf("unknown decoder type %q", typ)
}

type decSequence []decoder

func (s decSequence) decodeChain(toks []string) []string {
	for _, d := range s {
		toks = d.decodeChain(toks)
	}
	return toks
}

// byteLevelDec maps byte-level characters back to bytes and decodes runs of
// them as UTF-8; added tokens pass through as they are. A character outside
// the byte alphabet counts as byte 0, as in the reference.
type byteLevelDec struct{ env *decoderEnv }

func (d byteLevelDec) decodeChain(toks []string) []string {
	var out []string
	var buf []byte
	flush := func() {
		if len(buf) > 0 {
			out = append(out, decodeUTF8(buf, true))
			buf = buf[:0]
		}
	}
	for _, t := range toks {
		if d.env.added[t] {
			flush()
			out = append(out, t)
			continue
		}
		for _, r := range t {
			buf = append(buf, runeBytes[r])
		}
	}
	flush()
	return out
}

// cleanUpTokenization removes the spaces that word-level decoding leaves
// before punctuation and contractions.
func cleanUpTokenization(s string) string {
	for _, r := range [][2]string{
		{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
		{" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
	} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}

type wordPieceDec struct {
	prefix  string
	cleanup bool
}

func (d wordPieceDec) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		if i != 0 {
			if d.prefix != "" && strings.HasPrefix(t, d.prefix) {
				t = strings.Replace(t, d.prefix, "", 1)
			} else {
				t = " " + t
			}
		}
		if d.cleanup {
			t = cleanUpTokenization(t)
		}
		out[i] = t
	}
	return out
}

type metaspaceDec struct{ replacement string }

func (d metaspaceDec) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		t = strings.ReplaceAll(t, d.replacement, " ")
		if i == 0 {
			t = strings.TrimPrefix(t, " ")
		}
		out[i] = t
	}
	return out
}

type bpeDec struct{ suffix string }

func (d bpeDec) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		rep := " "
		if i == len(toks)-1 {
			rep = ""
		}
		out[i] = strings.ReplaceAll(t, d.suffix, rep)
	}
	return out
}

type replaceDec struct {
	p       *pattern
	content string
}

func (d replaceDec) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = d.p.replaceAll(nil, t, d.content)
	}
	return out
}

type fuseDec struct{}

func (fuseDec) decodeChain(toks []string) []string { return []string{strings.Join(toks, "")} }

// stripDec removes up to start leading and stop trailing copies of content
// (a single character) from each token.
type stripDec struct {
	content     string
	start, stop int
}

func (d stripDec) decodeChain(toks []string) []string {
	if utf16Len(d.content) != 1 {
		return toks // the reference compares single characters only
	}
	out := make([]string, len(toks))
	for i, t := range toks {
		for k := 0; k < d.start && strings.HasPrefix(t, d.content); k++ {
			t = t[len(d.content):]
		}
		for k := 0; k < d.stop && strings.HasSuffix(t, d.content); k++ {
			t = t[:len(t)-len(d.content)]
		}
		out[i] = t
	}
	return out
}

// byteFallbackDec turns runs of <0xXX> tokens back into text (decoded as
// UTF-8 by a TextDecoder, which drops a leading byte-order mark).
type byteFallbackDec struct{}

func byteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	hex := func(c byte) (byte, bool) {
		switch {
		case c >= '0' && c <= '9':
			return c - '0', true
		case c >= 'a' && c <= 'f':
			return c - 'a' + 10, true
		case c >= 'A' && c <= 'F':
			return c - 'A' + 10, true
		}
		return 0, false
	}
	hi, ok := hex(t[3])
	if !ok {
		return 0, false
	}
	lo, ok := hex(t[4])
	if !ok {
		return hi, true
	}
	return hi<<4 | lo, true
}

func (byteFallbackDec) decodeChain(toks []string) []string {
	var out []string
	var buf []byte
	for _, t := range toks {
		if b, ok := byteToken(t); ok {
			buf = append(buf, b)
			continue
		}
		if len(buf) > 0 {
			out = append(out, decodeUTF8(buf, false))
			buf = buf[:0]
		}
		out = append(out, t)
	}
	if len(buf) > 0 {
		out = append(out, decodeUTF8(buf, false))
	}
	return out
}
