package tokenizer

import (
	"context"
	"strings"
	"unicode/utf8"
)

// Encoding is the model input for one text or text pair.
type Encoding struct {
	IDs           []int64
	AttentionMask []int64
	// TypeIDs are the segment ids (0 for the first text, 1 for the second
	// in BERT-style pairs); all zeros when the post-processor assigns none.
	TypeIDs []int64
	Tokens  []string
	// Truncated is the number of tokens cut off by truncation.
	Truncated int
}

// Padding selects how EncodeBatch pads.
type Padding int

const (
	// NoPadding leaves every encoding at its own length.
	NoPadding Padding = iota
	// PadLongest pads to the longest encoding in the batch (capped by the
	// truncation length when truncating, and by MaxLength).
	PadLongest
	// PadMaxLength pads to the truncation length (or MaxLength).
	PadMaxLength
)

// Option adjusts one Encode call.
type Option func(*encodeOptions)

type encodeOptions struct {
	noSpecial bool
	truncate  bool
	maxLen    int
	padding   Padding
}

// WithoutSpecialTokens skips the post-processor's special tokens
// ([CLS]/[SEP], <s>, ...). Special tokens typed in the text still count.
func WithoutSpecialTokens() Option { return func(o *encodeOptions) { o.noSpecial = true } }

// WithTruncation cuts encodings to maxLen tokens, or to MaxLength when
// maxLen <= 0 (no cut when both are 0); the limit never exceeds MaxLength.
// As in transformers.js the
// cut happens after special tokens are added, so a truncated BERT input
// does not end with [SEP].
func WithTruncation(maxLen int) Option {
	return func(o *encodeOptions) { o.truncate, o.maxLen = true, maxLen }
}

// WithPadding pads encodings with the pad token on PaddingSide.
func WithPadding(p Padding) Option { return func(o *encodeOptions) { o.padding = p } }

// EncodeContext tokenizes one text. It stops with ctx's error when ctx ends
// (checked between pieces of the text and between regex matches), and with
// a *RegexTimeoutError when one of the tokenizer's patterns runs past
// MatchTimeout.
func (t *Tokenizer) EncodeContext(ctx context.Context, text string, opts ...Option) (*Encoding, error) {
	encs, err := t.EncodeBatchContext(ctx, []string{text}, opts...)
	if err != nil {
		return nil, err
	}
	return encs[0], nil
}

// EncodePairContext tokenizes a text pair, e.g. a query and a document for a
// cross-encoder or a premise and hypothesis for NLI. An empty b encodes a
// alone, as transformers.js does. It stops as EncodeContext does.
func (t *Tokenizer) EncodePairContext(ctx context.Context, a, b string, opts ...Option) (*Encoding, error) {
	encs, err := t.EncodePairBatchContext(ctx, [][2]string{{a, b}}, opts...)
	if err != nil {
		return nil, err
	}
	return encs[0], nil
}

// EncodeBatchContext tokenizes several texts, applying truncation and
// padding across the batch. It stops as EncodeContext does.
func (t *Tokenizer) EncodeBatchContext(ctx context.Context, texts []string, opts ...Option) (out []*Encoding, err error) {
	defer catch(&err)
	ru := newRun(ctx)
	o := t.options(opts)
	out = make([]*Encoding, len(texts))
	for i, s := range texts {
		ru.check()
		ru.text(s)
		out[i] = t.encode(ru, s, "", false, o)
	}
	t.finish(out, o)
	return out, nil
}

// EncodePairBatchContext tokenizes several text pairs. It stops as
// EncodeContext does.
func (t *Tokenizer) EncodePairBatchContext(ctx context.Context, pairs [][2]string, opts ...Option) (out []*Encoding, err error) {
	defer catch(&err)
	ru := newRun(ctx)
	o := t.options(opts)
	out = make([]*Encoding, len(pairs))
	for i, p := range pairs {
		ru.check()
		ru.text(p[0])
		ru.text(p[1])
		out[i] = t.encode(ru, p[0], p[1], p[1] != "", o)
	}
	t.finish(out, o)
	return out, nil
}

// Encode is EncodeContext without a context, for tokenizers the caller
// trusts (tests, tools): it panics when a pattern times out. Code that
// serves requests uses EncodeContext.
func (t *Tokenizer) Encode(text string, opts ...Option) *Encoding {
	return must(t.EncodeContext(context.Background(), text, opts...))
}

// EncodePair is EncodePairContext without a context; it panics as Encode does.
func (t *Tokenizer) EncodePair(a, b string, opts ...Option) *Encoding {
	return must(t.EncodePairContext(context.Background(), a, b, opts...))
}

// EncodeBatch is EncodeBatchContext without a context; it panics as Encode does.
func (t *Tokenizer) EncodeBatch(texts []string, opts ...Option) []*Encoding {
	return must(t.EncodeBatchContext(context.Background(), texts, opts...))
}

// EncodePairBatch is EncodePairBatchContext without a context; it panics as
// Encode does.
func (t *Tokenizer) EncodePairBatch(pairs [][2]string, opts ...Option) []*Encoding {
	return must(t.EncodePairBatchContext(context.Background(), pairs, opts...))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func (t *Tokenizer) options(opts []Option) encodeOptions {
	var o encodeOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

func (t *Tokenizer) encode(ru *run, a, b string, pair bool, o encodeOptions) *Encoding {
	ta := t.encodeText(ru, a)
	var tb []string
	if pair {
		tb = t.encodeText(ru, b)
		if tb == nil {
			tb = []string{}
		}
	}
	var toks []string
	var types []int64
	if t.post != nil {
		toks, types = t.post.process(ta, tb, !o.noSpecial)
	} else {
		toks = append(ta, tb...)
	}
	e := &Encoding{Tokens: toks, IDs: make([]int64, 0, len(toks))}
	kept := toks[:0:0]
	for _, tok := range toks {
		id, ok := t.tokenID(tok)
		if !ok {
			continue // no unknown token to stand in; nothing to feed the model
		}
		kept = append(kept, tok)
		e.IDs = append(e.IDs, id)
	}
	if len(kept) != len(toks) {
		e.Tokens, types = kept, nil
	}
	e.AttentionMask = fill(1, len(e.IDs))
	if len(types) == len(e.IDs) {
		e.TypeIDs = types
	} else {
		e.TypeIDs = fill(0, len(e.IDs))
	}
	return e
}

func fill(v int64, n int) []int64 {
	s := make([]int64, n)
	if v != 0 {
		for i := range s {
			s[i] = v
		}
	}
	return s
}

// tokenID maps a token string to its id the way the reference does: added
// tokens first, then the vocabulary, then the unknown token.
func (t *Tokenizer) tokenID(tok string) (int64, bool) {
	if a, ok := t.added[tok]; ok {
		return a.ID, true
	}
	if id, ok := t.vocab.ids[tok]; ok {
		return id, true
	}
	return t.vocab.unkID, t.vocab.hasUnk
}

// finish applies truncation and padding to a batch.
func (t *Tokenizer) finish(encs []*Encoding, o encodeOptions) {
	limit := t.maxLength // 0 = none
	if o.truncate && o.maxLen > 0 && (limit == 0 || o.maxLen < limit) {
		limit = o.maxLen
	}
	if o.padding == PadLongest {
		longest := 0
		for _, e := range encs {
			longest = max(longest, len(e.IDs))
		}
		if limit == 0 || longest < limit {
			limit = longest
		}
	}
	if limit == 0 {
		return
	}
	pad, _ := t.PadID()
	for _, e := range encs {
		n := len(e.IDs)
		switch {
		case n > limit && o.truncate:
			e.Truncated = n - limit
			e.IDs, e.AttentionMask, e.TypeIDs, e.Tokens = e.IDs[:limit], e.AttentionMask[:limit], e.TypeIDs[:limit], e.Tokens[:limit]
		case n < limit && o.padding != NoPadding:
			padTok, _ := t.specialToken("pad_token", "eos_token")
			k := limit - n
			if t.paddingSide == "left" {
				e.IDs = append(fill(pad, k), e.IDs...)
				e.AttentionMask = append(fill(0, k), e.AttentionMask...)
				e.TypeIDs = append(fill(0, k), e.TypeIDs...)
				e.Tokens = append(repeat(padTok, k), e.Tokens...)
			} else {
				e.IDs = append(e.IDs, fill(pad, k)...)
				e.AttentionMask = append(e.AttentionMask, fill(0, k)...)
				e.TypeIDs = append(e.TypeIDs, fill(0, k)...)
				e.Tokens = append(e.Tokens, repeat(padTok, k)...)
			}
		}
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// encodeText turns one text into tokens: added tokens are cut out first,
// the rest is normalized, cut again at normalized added tokens,
// pre-tokenized and run through the model.
func (t *Tokenizer) encodeText(ru *run, text string) []string {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	sections := t.splitRaw.split(ru, text)
	t.stripAround(sections)
	var out []string
	for si, sec := range sections {
		if sec == "" {
			continue
		}
		ru.check()
		if _, ok := t.added[sec]; ok {
			out = append(out, sec)
			continue
		}
		if t.removeSpace {
			sec = strings.Join(strings.FieldsFunc(jsTrim(sec), isJSSpace), " ")
		}
		if t.lowerStrip {
			sec = removeMarks(jsLower(sec), false)
		}
		if t.norm != nil {
			sec = t.norm.normalize(ru, sec)
		}
		if sec == "" {
			continue
		}
		subs := t.splitNorm.split(ru, sec)
		t.stripAround(subs)
		for _, sub := range subs {
			if sub == "" {
				continue
			}
			if _, ok := t.added[sub]; ok {
				out = append(out, sub)
				continue
			}
			words := []string{sub}
			if t.pre != nil {
				words = t.pre.preTokenize(ru, words, si)
			}
			ru.check()
			out = append(out, t.model.tokenize(ru, words)...)
		}
	}
	return out
}
