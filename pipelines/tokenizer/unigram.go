package tokenizer

import (
	"encoding/json"
	"fmt"
	"math"
)

// unigram is a SentencePiece unigram model: each word is segmented by the
// Viterbi path through the lattice of vocabulary pieces, with unknown
// single characters scored at (lowest score - 10).
type unigram struct {
	v        *vocab
	scores   []float64
	unkScore float64
	trie     runeTrie
}

func newUnigram(raw json.RawMessage) (model, *vocab, error) {
	var c struct {
		Vocab []json.RawMessage `json:"vocab"`
		UnkID *int64            `json:"unk_id"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, nil, fmt.Errorf("Unigram: %w", err)
	}
	if len(c.Vocab) == 0 {
		return nil, nil, fmt.Errorf("Unigram: empty vocab")
	}
	v := &vocab{ids: make(map[string]int64, len(c.Vocab)), unkID: undefinedID}
	m := &unigram{v: v, scores: make([]float64, len(c.Vocab))}
	minScore := math.Inf(1)
	for i, e := range c.Vocab {
		var pair []json.RawMessage
		if err := json.Unmarshal(e, &pair); err != nil || len(pair) != 2 {
			return nil, nil, fmt.Errorf("Unigram vocab[%d]: want [piece, score]", i)
		}
		var piece string
		var score float64
		if err := json.Unmarshal(pair[0], &piece); err != nil {
			return nil, nil, fmt.Errorf("Unigram vocab[%d]: %w", i, err)
		}
		if err := json.Unmarshal(pair[1], &score); err != nil {
			return nil, nil, fmt.Errorf("Unigram vocab[%d]: %w", i, err)
		}
		v.set(piece, int64(i))
		m.scores[i] = score
		minScore = math.Min(minScore, score)
		m.trie.insert(piece)
	}
	m.unkScore = minScore - 10
	if c.UnkID != nil && *c.UnkID >= 0 && *c.UnkID < int64(len(c.Vocab)) {
		v.unkID, v.hasUnk = *c.UnkID, true
		v.unk = v.tokens[*c.UnkID]
		m.scores[*c.UnkID] = m.unkScore
	}
	return m, v, nil
}

func (m *unigram) score(id int64) float64 {
	if id >= 0 && id < int64(len(m.scores)) {
		return m.scores[id]
	}
	return 0
}

// latticeNode is one candidate piece; prev and best are filled by Viterbi.
type latticeNode struct {
	id       int64
	pos, len int
	score    float64
	prev     int
	best     float64
}

func (m *unigram) tokenize(words []string) []string {
	var out []string
	for _, w := range words {
		out = append(out, m.segment(w)...)
	}
	return fuseUnknown(out, m.v)
}

// segment runs Viterbi over one word, visiting nodes in the same order as
// the reference so that ties resolve identically.
func (m *unigram) segment(w string) []string {
	chars := []rune(w)
	n := len(chars)
	nodes := []latticeNode{{id: 0, pos: 0, prev: -1}, {id: 0, pos: n, prev: -1}}
	begin := make([][]int, n+1)
	end := make([][]int, n+1)
	begin[n] = append(begin[n], 1)
	end[0] = append(end[0], 0)
	insert := func(pos, length int, score float64, id int64) {
		nodes = append(nodes, latticeNode{id: id, pos: pos, len: length, score: score, prev: -1})
		k := len(nodes) - 1
		begin[pos] = append(begin[pos], k)
		end[pos+length] = append(end[pos+length], k)
	}
	for pos := 0; pos < n; pos++ {
		single := false
		m.trie.prefixes(chars, pos, func(length int) {
			piece := string(chars[pos : pos+length])
			id := m.v.lookup(piece)
			insert(pos, length, m.score(id), id)
			if length == 1 {
				single = true
			}
		})
		if !single {
			insert(pos, 1, m.unkScore, m.v.unkID)
		}
	}
	for pos := 0; pos <= n; pos++ {
		for _, r := range begin[pos] {
			best, bestScore := -1, 0.0
			for _, l := range end[pos] {
				s := nodes[l].best + nodes[r].score
				if best < 0 || s > bestScore {
					best, bestScore = l, s
				}
			}
			if best < 0 {
				return nil
			}
			nodes[r].prev, nodes[r].best = best, bestScore
		}
	}
	var rev []string
	for k := nodes[1].prev; k > 0 && nodes[k].prev >= 0; k = nodes[k].prev {
		rev = append(rev, string(chars[nodes[k].pos:nodes[k].pos+nodes[k].len]))
	}
	out := make([]string, len(rev))
	for i, p := range rev {
		out[len(rev)-1-i] = p
	}
	return out
}

// runeTrie holds the vocabulary pieces for common-prefix search.
type runeTrie struct {
	nodes []trieNode
}

type trieNode struct {
	children map[rune]int32
	leaf     bool
}

func (t *runeTrie) insert(s string) {
	if len(t.nodes) == 0 {
		t.nodes = append(t.nodes, trieNode{})
	}
	cur := int32(0)
	for _, r := range s {
		next, ok := t.nodes[cur].children[r]
		if !ok {
			if t.nodes[cur].children == nil {
				t.nodes[cur].children = make(map[rune]int32, 2)
			}
			t.nodes = append(t.nodes, trieNode{})
			next = int32(len(t.nodes) - 1)
			t.nodes[cur].children[r] = next
		}
		cur = next
	}
	t.nodes[cur].leaf = true
}

// prefixes calls f with the length of every stored piece that starts at
// chars[start], shortest first.
func (t *runeTrie) prefixes(chars []rune, start int, f func(length int)) {
	if len(t.nodes) == 0 {
		return
	}
	cur := int32(0)
	for i := start; i < len(chars); i++ {
		next, ok := t.nodes[cur].children[chars[i]]
		if !ok {
			return
		}
		cur = next
		if t.nodes[cur].leaf {
			f(i - start + 1)
		}
	}
}
