package tokenizer

import (
	"encoding/json"
	"fmt"
)

// addedToken is an entry of tokenizer.json "added_tokens".
type addedToken struct {
	ID         int64  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

// normalizedFlag is the token's "normalized" flag; it defaults to !special.
func (a addedToken) normalizedFlag() bool {
	if a.Normalized != nil {
		return *a.Normalized
	}
	return !a.Special
}

func parseAddedTokens(raw json.RawMessage) ([]addedToken, error) {
	if isNull(raw) {
		return nil, nil
	}
	var list []addedToken
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("added_tokens: %w", err)
	}
	if len(list) > MaxAddedTokens {
		return nil, fmt.Errorf("added_tokens: %d tokens, more than %d", len(list), MaxAddedTokens)
	}
	for i, a := range list {
		if len(a.Content) > MaxAddedTokenBytes {
			return nil, fmt.Errorf("added_tokens[%d]: content of %d bytes, more than %d", i, len(a.Content), MaxAddedTokenBytes)
		}
		if a.Content == "" {
			return nil, fmt.Errorf("added_tokens[%d]: empty content", i)
		}
		if a.ID < 0 {
			return nil, fmt.Errorf("added_tokens[%d]: negative id", i)
		}
	}
	return list, nil
}

// splitter cuts text around the longest added-token match at each position,
// scanning left to right (a byte trie over the token contents).
type splitter struct {
	first [256]bool
	nodes []splitNode
}

type splitNode struct {
	next map[byte]int32
	end  int // length of the content ending here, 0 if none
}

func newSplitter(contents []string) *splitter {
	s := &splitter{nodes: []splitNode{{}}}
	for _, c := range contents {
		if c == "" {
			continue
		}
		s.first[c[0]] = true
		cur := int32(0)
		for i := 0; i < len(c); i++ {
			nx, ok := s.nodes[cur].next[c[i]]
			if !ok {
				if s.nodes[cur].next == nil {
					s.nodes[cur].next = make(map[byte]int32, 2)
				}
				s.nodes = append(s.nodes, splitNode{})
				nx = int32(len(s.nodes) - 1)
				s.nodes[cur].next[c[i]] = nx
			}
			cur = nx
		}
		s.nodes[cur].end = len(c)
	}
	return s
}

// split returns text cut into plain pieces and matched contents, in order.
func (s *splitter) split(ru *run, text string) []string {
	if len(s.nodes) == 1 {
		return []string{text}
	}
	var out []string
	start := 0
	for i := 0; i < len(text); {
		ru.tick(1)
		if !s.first[text[i]] {
			i++
			continue
		}
		cur, best := int32(0), 0
		for j := i; j < len(text); j++ {
			nx, ok := s.nodes[cur].next[text[j]]
			if !ok {
				break
			}
			cur = nx
			if s.nodes[cur].end > 0 {
				best = s.nodes[cur].end
			}
		}
		if best == 0 {
			i++
			continue
		}
		if i > start {
			out = append(out, text[start:i])
		}
		out = append(out, text[i:i+best])
		i += best
		start = i
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// stripAround applies the lstrip/rstrip flags of the added tokens found in
// pieces to their neighbours.
func (t *Tokenizer) stripAround(pieces []string) {
	for i, p := range pieces {
		a, ok := t.added[p]
		if !ok {
			continue
		}
		if a.LStrip && i > 0 {
			pieces[i-1] = jsTrimEnd(pieces[i-1])
		}
		if a.RStrip && i < len(pieces)-1 {
			pieces[i+1] = jsTrimStart(pieces[i+1])
		}
	}
}
