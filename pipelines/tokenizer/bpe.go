package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// bpe is a byte-pair-encoding model. Merges are applied with a priority
// queue keyed by (merge rank, position), so a word of n symbols costs
// O(n log n) rather than the O(n²) of rescanning for the best pair.
type bpe struct {
	v *vocab
	// pieces interns every string that takes part in a merge.
	pieces map[string]int32
	names  []string
	// merges maps a pair of interned pieces to its rank and result.
	merges map[uint64]mergeRule

	endOfWordSuffix         string
	continuingSubwordSuffix string
	byteFallback            bool
	ignoreMerges            bool
	fuseUnk                 bool

	cache wordCache
}

type mergeRule struct {
	rank   int32
	result int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func newBPE(raw json.RawMessage) (model, *vocab, error) {
	var c struct {
		Vocab                   map[string]int64 `json:"vocab"`
		Merges                  json.RawMessage  `json:"merges"`
		Unk                     *string          `json:"unk_token"`
		EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
		ContinuingSubwordSuffix *string          `json:"continuing_subword_suffix"`
		ByteFallback            bool             `json:"byte_fallback"`
		IgnoreMerges            bool             `json:"ignore_merges"`
		FuseUnk                 bool             `json:"fuse_unk"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, nil, fmt.Errorf("BPE: %w", err)
	}
	if len(c.Vocab) > MaxVocab {
		return nil, nil, fmt.Errorf("BPE: %d vocabulary entries, more than %d", len(c.Vocab), MaxVocab)
	}
	v := vocabFromMap(c.Vocab, c.Unk)
	m := &bpe{
		v:            v,
		byteFallback: c.ByteFallback,
		ignoreMerges: c.IgnoreMerges,
		fuseUnk:      c.FuseUnk,
	}
	if c.EndOfWordSuffix != nil {
		m.endOfWordSuffix = *c.EndOfWordSuffix
	}
	if c.ContinuingSubwordSuffix != nil {
		m.continuingSubwordSuffix = *c.ContinuingSubwordSuffix
	}
	merges, err := parseMerges(c.Merges)
	if err == nil && len(merges) > MaxMerges {
		err = fmt.Errorf("%d merges, more than %d", len(merges), MaxMerges)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("BPE: %w", err)
	}
	m.pieces = make(map[string]int32, len(merges)+len(c.Vocab))
	m.merges = make(map[uint64]mergeRule, len(merges))
	for rank, mg := range merges {
		// a repeated pair keeps its last rank, as a Map built in order does
		m.merges[pairKey(m.intern(mg[0]), m.intern(mg[1]))] = mergeRule{rank: int32(rank), result: m.intern(mg[0] + mg[1])}
	}
	return m, v, nil
}

// parseMerges reads merges written as "a b" strings (only the first two
// space-separated parts count) or as [a, b] pairs.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		out := make([][2]string, len(strs))
		for i, s := range strs {
			a, rest, ok := strings.Cut(s, " ")
			if !ok {
				return nil, fmt.Errorf("merge %d %q has no space", i, s)
			}
			b, _, _ := strings.Cut(rest, " ")
			out[i] = [2]string{a, b}
		}
		return out, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("merges are neither \"a b\" strings nor [a, b] pairs: %w", err)
	}
	out := make([][2]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("merge %d has %d parts", i, len(p))
		}
		out[i] = [2]string{p[0], p[1]}
	}
	return out, nil
}

func (m *bpe) intern(s string) int32 {
	if id, ok := m.pieces[s]; ok {
		return id
	}
	id := int32(len(m.names))
	m.pieces[s] = id
	m.names = append(m.names, s)
	return id
}

func (m *bpe) tokenize(ru *run, words []string) []string {
	var out []string
	for _, w := range words {
		ru.tick(1 + len(w)/16)
		if m.ignoreMerges {
			if _, ok := m.v.ids[w]; ok {
				out = append(out, w)
				continue
			}
		}
		for _, t := range m.word(w) {
			if _, ok := m.v.ids[t]; ok {
				out = append(out, t)
				continue
			}
			if m.byteFallback {
				if bytes, ok := m.byteTokens(t); ok {
					out = append(out, bytes...)
					continue
				}
			}
			if m.v.unk != "" || m.v.hasUnk {
				out = append(out, m.v.unk)
			}
		}
	}
	if m.fuseUnk {
		out = fuseUnknown(out, m.v)
	}
	return out
}

// byteTokens spells t as <0xXX> tokens when all of them are in the vocab.
func (m *bpe) byteTokens(t string) ([]string, bool) {
	out := make([]string, 0, len(t))
	for i := 0; i < len(t); i++ {
		b := fmt.Sprintf("<0x%02X>", t[i])
		if _, ok := m.v.ids[b]; !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}

// symbol is one live piece of a word during merging.
type symbol struct {
	id         int32 // interned piece, or -1 when it takes part in no merge
	start, end int   // byte span in the word
	prev, next int   // neighbours, -1 at the ends
	dead       bool
}

type candidate struct {
	rank        int32
	left, right int // symbol indexes; left is also the position tie-break
	lid, rid    int32
}

// candidates is a binary min-heap ordered by (rank, left position).
type candidates []candidate

func (c candidates) less(i, j int) bool {
	if c[i].rank != c[j].rank {
		return c[i].rank < c[j].rank
	}
	return c[i].left < c[j].left
}

func (c *candidates) push(x candidate) {
	*c = append(*c, x)
	h := *c
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (c *candidates) pop() candidate {
	h := *c
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*c = h
	return top
}

// word applies the merges to one word.
func (m *bpe) word(w string) []string {
	if w == "" {
		return nil
	}
	if cached, ok := m.cache.get(w); ok {
		return cached
	}
	// the end-of-word suffix is glued to the last character
	text := w + m.endOfWordSuffix
	syms := make([]symbol, 0, utf8.RuneCountInString(w))
	for i := range w {
		syms = append(syms, symbol{start: i, prev: len(syms) - 1, next: len(syms) + 1})
	}
	for i := range syms {
		if i+1 < len(syms) {
			syms[i].end = syms[i+1].start
		} else {
			syms[i].end = len(text)
			syms[i].next = -1
		}
		id, ok := m.pieces[text[syms[i].start:syms[i].end]]
		if !ok {
			id = -1
		}
		syms[i].id = id
	}
	q := make(candidates, 0, len(syms))
	push := func(l int) {
		r := syms[l].next
		if r < 0 || syms[l].id < 0 || syms[r].id < 0 {
			return
		}
		if rule, ok := m.merges[pairKey(syms[l].id, syms[r].id)]; ok {
			q.push(candidate{rank: rule.rank, left: l, right: r, lid: syms[l].id, rid: syms[r].id})
		}
	}
	for i := 0; i+1 < len(syms); i++ {
		push(i)
	}
	for len(q) > 0 {
		c := q.pop()
		l, r := &syms[c.left], &syms[c.right]
		if l.dead || r.dead || l.next != c.right || l.id != c.lid || r.id != c.rid {
			continue
		}
		l.id = m.merges[pairKey(c.lid, c.rid)].result
		l.end = r.end
		l.next = r.next
		r.dead = true
		if l.next >= 0 {
			syms[l.next].prev = c.left
		}
		if l.prev >= 0 {
			push(l.prev)
		}
		push(c.left)
	}
	var out []string
	for i := 0; i >= 0; i = syms[i].next {
		out = append(out, text[syms[i].start:syms[i].end])
	}
	if m.continuingSubwordSuffix != "" {
		for i := 0; i+1 < len(out); i++ {
			out[i] += m.continuingSubwordSuffix
		}
	}
	m.cache.put(w, out)
	return out
}

// wordCache remembers the merges of recent short words. It is safe for
// concurrent use; when full it starts over.
type wordCache struct {
	mu sync.Mutex
	m  map[string][]string
}

const (
	cacheWords   = 1 << 15
	cacheWordLen = 256
)

func (c *wordCache) get(w string) ([]string, bool) {
	if len(w) >= cacheWordLen {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[w]
	return v, ok
}

func (c *wordCache) put(w string, toks []string) {
	if len(w) >= cacheWordLen {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= cacheWords {
		c.m = make(map[string][]string, 1024)
	}
	c.m[w] = toks
}
