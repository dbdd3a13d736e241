package engine

import (
	"slices"
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/internal/ggufgen"
)

// seqOf is n tokens from start: start, start+1, ...
func seqOf(start, n int) []yz.Token {
	out := make([]yz.Token, n)
	for i := range out {
		out[i] = yz.Token(start + i)
	}
	return out
}

// cachedSlot is an idle slot caching toks, all of them reusable, last used
// at clock used with value floor base.
func cachedSlot(id int, toks []yz.Token, used, base uint64) *slot {
	return &slot{id: id, cache: toks, exact: len(toks), used: used, base: base, logit: -1}
}

// TestChooseSlot: the slot choice over the scenarios slot.go describes.
func TestChooseSlot(t *testing.T) {
	agent := seqOf(1000, 7700)                       // an agent's cached prompt
	template := seqOf(1000, 3)                       // the template's first tokens, which every prompt shares
	side := slices.Concat(template, seqOf(5000, 24)) // a 27-token side request
	busy := &slot{id: 9, r: &request{}}
	for _, tc := range []struct {
		name   string
		slots  []*slot
		prompt []yz.Token
		want   int // slot id; -1: none
	}{
		{"a side request takes an empty slot over a 3-token common prefix",
			[]*slot{cachedSlot(0, agent, 1, 0), cachedSlot(1, nil, 0, 0), cachedSlot(2, nil, 0, 0)}, side, 1},
		{"the agent's next turn reuses its prefix",
			[]*slot{cachedSlot(0, nil, 0, 0), cachedSlot(1, agent, 1, 0)}, slices.Concat(agent, seqOf(9000, 50)), 1},
		{"a new session sharing most of the prefix takes it over an empty slot",
			[]*slot{cachedSlot(0, nil, 0, 0), cachedSlot(1, agent, 1, 0)}, slices.Concat(agent[:7000], seqOf(9000, 50)), 1},
		{"sharing less than half the slot's cache is not reuse",
			[]*slot{cachedSlot(0, nil, 0, 0), cachedSlot(1, agent, 1, 0)}, slices.Concat(agent[:3000], seqOf(9000, 50)), 0},
		{"the longest reusable prefix wins",
			[]*slot{cachedSlot(0, agent[:4000], 5, 0), cachedSlot(1, agent, 1, 0)}, slices.Concat(agent, seqOf(9000, 1)), 1},
		{"equal prefixes: the one losing fewer cached tokens",
			[]*slot{cachedSlot(0, slices.Concat(agent[:100], seqOf(1, 90)), 1, 0), cachedSlot(1, slices.Concat(agent[:100], seqOf(1, 10)), 2, 0)},
			slices.Concat(agent[:100], seqOf(9000, 5)), 1},
		{"equal prefixes and losses: the least recently used",
			[]*slot{cachedSlot(0, agent[:100], 7, 0), cachedSlot(1, agent[:100], 3, 0)}, agent[:200], 1},
		{"an answer's KV (not exact) does not count: half of the exact prefix is substantial",
			[]*slot{{id: 0, cache: agent, exact: 100, used: 1, logit: -1}, cachedSlot(1, nil, 0, 0)}, slices.Concat(agent[:50], seqOf(9000, 5)), 0},
		{"a slot with no exact KV is empty",
			[]*slot{cachedSlot(0, side, 1, 0), {id: 1, cache: agent, exact: 0, used: 2, logit: -1}}, seqOf(7000, 27), 1},
		{"no empty slot: the short side prefix is evicted before the agent's, though used later",
			[]*slot{cachedSlot(0, agent, 1, 0), cachedSlot(1, side, 5, 0)}, seqOf(7000, 27), 1},
		{"no empty slot: a long prefix unused since the floor rose past its value goes",
			[]*slot{cachedSlot(0, agent, 1, 0), cachedSlot(1, side, 500, 8000)}, seqOf(7000, 27), 0},
		{"equal values: the least recently used goes",
			[]*slot{cachedSlot(0, side, 4, 0), cachedSlot(1, side, 2, 0)}, seqOf(7000, 27), 1},
		{"busy slots are never chosen",
			[]*slot{busy, cachedSlot(1, agent, 1, 0)}, agent, 1},
		{"no idle slot", []*slot{busy}, agent, -1},
		{"a follower (no prompt) takes an empty slot",
			[]*slot{cachedSlot(0, side, 1, 0), cachedSlot(1, nil, 0, 0)}, nil, 1},
	} {
		got := chooseSlot(tc.slots, tc.prompt)
		if id := -1; got != nil {
			id = got.id
			if id != tc.want {
				t.Errorf("%s: slot %d, want %d", tc.name, id, tc.want)
			}
		} else if tc.want != -1 {
			t.Errorf("%s: no slot, want %d", tc.name, tc.want)
		}
	}
}

// TestPickSlotRaisesFloor: evicting a prefix raises the value floor to its
// value; reusing one, or taking an empty slot, does not.
func TestPickSlotRaisesFloor(t *testing.T) {
	s := &scheduler{slots: []*slot{cachedSlot(0, seqOf(10, 40), 1, 0), cachedSlot(1, nil, 0, 0)}}
	if sl := s.pickSlot(seqOf(500, 5)); sl.id != 1 || s.floor != 0 {
		t.Fatalf("empty slot: got %d, floor %d", sl.id, s.floor)
	}
	s.slots[1] = cachedSlot(1, seqOf(500, 8), 2, 0)
	if sl := s.pickSlot(seqOf(10, 41)); sl.id != 0 || s.floor != 0 {
		t.Fatalf("reuse: got %d, floor %d", sl.id, s.floor)
	}
	if sl := s.pickSlot(seqOf(900, 5)); sl.id != 1 || s.floor != 8 {
		t.Fatalf("evict: got %d, floor %d, want slot 1 and floor 8", sl.id, s.floor)
	}
}

// TestAgentPrefixSurvivesSideRequests: on a random-weight model with 2 and
// with 4 slots, a long agent prompt's KV survives a burst of short side
// requests (more of them than there are slots): the agent's next turn
// reuses it.
func TestAgentPrefixSurvivesSideRequests(t *testing.T) {
	for _, slots := range []int{2, 4} {
		m := openModel(t, ggufgen.Tiny(ggufgen.BPE), Options{Slots: slots, ContextSize: 1024})
		agent := tokenize(t, m, "system: you are a coding agent with tools to read, edit and run the files of the project. "+
			"answer in short sentences, call a tool when you need to see a file, and never guess what a file holds. "+
			"the project is a small web server with a router, a store and a page; the user asks about its tests. user: why does the router test fail")
		first := generate(t, m, Request{Prompt: agent, MaxTokens: 4})
		for i := range 3 * slots {
			side := tokenize(t, m, []string{"title this chat", "summarise: hi", "is this a question?"}[i%3])
			if r := generate(t, m, Request{Prompt: side, MaxTokens: 2}); r.final.Done && r.final.Err != nil {
				t.Fatal(r.final.Err)
			}
		}
		next := slices.Concat(agent, first.tokens, tokenize(t, m, " user: and the store test"))
		r := generate(t, m, Request{Prompt: next, MaxTokens: 4})
		if r.final.Usage.CachedTokens != len(agent) {
			t.Errorf("%d slots: the agent's next turn reused %d of its %d prompt tokens, want %d", slots, r.final.Usage.CachedTokens, len(next), len(agent))
		}
	}
}
