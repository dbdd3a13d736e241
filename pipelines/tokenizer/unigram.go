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
	pieces   []string // trie leaf index -> piece
	leafIDs  []int64  // trie leaf index -> id, set by finish
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
	if len(c.Vocab) > MaxVocab {
		return nil, nil, fmt.Errorf("Unigram: %d vocabulary entries, more than %d", len(c.Vocab), MaxVocab)
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
		m.scores[i] = score
		minScore = math.Min(minScore, score)
		if _, dup := v.ids[piece]; !dup {
			m.trie.insert(piece, int32(len(m.pieces)))
			m.pieces = append(m.pieces, piece)
		}
		v.set(piece, int64(i))
	}
	m.unkScore = minScore - 10
	m.leafIDs = make([]int64, len(m.pieces))
	m.finish()
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

// latticeNode is one candidate piece. best and prev are its Viterbi score
// and predecessor; nextEnd chains the nodes that end at the same position,
// in insertion order.
type latticeNode struct {
	id       int64
	pos, len int32
	score    float64
	best     float64
	prev     int32
	nextEnd  int32
}

func (m *unigram) tokenize(ru *run, words []string) []string {
	var out []string
	for _, w := range words {
		ru.tick(1 + len(w)/16)
		out = append(out, m.segment(w)...)
	}
	return fuseUnknown(out, m.v)
}

// segment runs Viterbi over one word. Nodes are created position by
// position in the reference's order (bos, then pieces by start position and
// length, an unknown node where no single character matched), and each node
// picks the first best-scoring predecessor, so ties resolve identically.
// The lattice is solved while it is built, in one pass.
func (m *unigram) segment(w string) []string {
	chars := []rune(w)
	n := len(chars)
	nodes := make([]latticeNode, 1, 2*n+2)
	nodes[0] = latticeNode{prev: -1, nextEnd: -1} // bos, ends at 0
	head := make([]int32, n+1)
	tail := make([]int32, n+1)
	for i := range head {
		head[i], tail[i] = -1, -1
	}
	head[0], tail[0] = 0, 0
	// link scores node k against the nodes ending at its start and appends
	// it to the list of nodes ending at its end.
	link := func(k int32) bool {
		nd := &nodes[k]
		best, bestScore := int32(-1), 0.0
		for l := head[nd.pos]; l >= 0; l = nodes[l].nextEnd {
			s := nodes[l].best + nd.score
			if best < 0 || s > bestScore {
				best, bestScore = l, s
			}
		}
		if best < 0 {
			return false
		}
		nd.prev, nd.best = best, bestScore
		e := nd.pos + nd.len
		if tail[e] < 0 {
			head[e] = k
		} else {
			nodes[tail[e]].nextEnd = k
		}
		tail[e] = k
		return true
	}
	for pos := 0; pos < n; pos++ {
		single := false
		ok := true
		m.trie.prefixes(chars, pos, func(length int, leaf int32) {
			id := m.leafIDs[leaf]
			nodes = append(nodes, latticeNode{id: id, pos: int32(pos), len: int32(length), score: m.score(id), nextEnd: -1})
			ok = ok && link(int32(len(nodes)-1))
			single = single || length == 1
		})
		if !single {
			nodes = append(nodes, latticeNode{id: m.v.unkID, pos: int32(pos), len: 1, score: m.unkScore, nextEnd: -1})
			ok = ok && link(int32(len(nodes)-1))
		}
		if !ok {
			return nil
		}
	}
	eos := latticeNode{pos: int32(n), nextEnd: -1}
	nodes = append(nodes, eos)
	if !link(int32(len(nodes) - 1)) {
		return nil
	}
	var rev []string
	for k := nodes[len(nodes)-1].prev; k > 0; k = nodes[k].prev {
		rev = append(rev, string(chars[nodes[k].pos:nodes[k].pos+nodes[k].len]))
	}
	out := make([]string, len(rev))
	for i, p := range rev {
		out[len(rev)-1-i] = p
	}
	return out
}

// finish resolves the ids of the trie's pieces once added tokens are in the
// vocabulary (an added token may reassign a piece's id).
func (m *unigram) finish() {
	for i, p := range m.pieces {
		m.leafIDs[i] = m.v.lookup(p)
	}
}

// runeTrie holds the vocabulary pieces for common-prefix search.
type runeTrie struct {
	nodes []trieNode
}

type trieNode struct {
	children map[rune]int32
	leaf     int32 // index of the piece ending here, -1 if none
}

func (t *runeTrie) insert(s string, index int32) {
	if len(t.nodes) == 0 {
		t.nodes = append(t.nodes, trieNode{leaf: -1})
	}
	cur := int32(0)
	for _, r := range s {
		next, ok := t.nodes[cur].children[r]
		if !ok {
			if t.nodes[cur].children == nil {
				t.nodes[cur].children = make(map[rune]int32, 2)
			}
			t.nodes = append(t.nodes, trieNode{leaf: -1})
			next = int32(len(t.nodes) - 1)
			t.nodes[cur].children[r] = next
		}
		cur = next
	}
	if t.nodes[cur].leaf < 0 {
		t.nodes[cur].leaf = index
	}
}

// prefixes calls f with the length and index of every stored piece that
// starts at chars[start], shortest first.
func (t *runeTrie) prefixes(chars []rune, start int, f func(length int, leaf int32)) {
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
		if t.nodes[cur].leaf >= 0 {
			f(i-start+1, t.nodes[cur].leaf)
		}
	}
}
