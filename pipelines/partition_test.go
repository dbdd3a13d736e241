package pipelines

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func checkCover(t *testing.T, lengths []int, gs []group) {
	t.Helper()
	at := 0
	for _, g := range gs {
		if g.start != at || g.end <= g.start {
			t.Fatalf("groups %v do not cut [0,%d) into non-empty consecutive pieces", gs, len(lengths))
		}
		at = g.end
	}
	if at != len(lengths) {
		t.Fatalf("groups %v end at %d, want %d", gs, at, len(lengths))
	}
}

// sortedLengths is n random lengths in [1, most], ascending.
func sortedLengths(rng *rand.Rand, n, most int) []int {
	lengths := make([]int, n)
	for i := range lengths {
		lengths[i] = 1 + rng.IntN(most)
	}
	slices.Sort(lengths)
	return lengths
}

func totalCost(lengths []int, gs []group, overhead int) int {
	c := 0
	for _, g := range gs {
		c += groupCost(lengths, g, overhead)
	}
	return c
}

func TestPartitionShapes(t *testing.T) {
	if gs := partition(nil, runOverhead, 2); gs != nil {
		t.Fatalf("no sequences: %v", gs)
	}
	same := slices.Repeat([]int{12}, 32)
	if gs := partition(same, runOverhead, 1); len(gs) != 1 {
		t.Fatalf("equal lengths: %v, want one run (padding costs nothing)", gs)
	}
	if gs := partition(same, runOverhead, 2); !slices.Equal(gs, []group{{0, 16}, {16, 32}}) {
		t.Fatalf("equal lengths on two lanes: %v, want two halves", gs)
	}
	// Two clusters: short texts and long ones run apart.
	two := append(slices.Repeat([]int{5}, 10), slices.Repeat([]int{60}, 10)...)
	if gs := partition(two, runOverhead, 1); !slices.Equal(gs, []group{{0, 10}, {10, 20}}) {
		t.Fatalf("two clusters: %v", gs)
	}
	// One sequence cannot be split for a second lane.
	if gs := partition([]int{9}, runOverhead, 4); !slices.Equal(gs, []group{{0, 1}}) {
		t.Fatalf("one sequence on 4 lanes: %v", gs)
	}
	// Three sequences, four lanes: one each.
	if gs := partition([]int{3, 4, 5}, runOverhead, 4); len(gs) != 3 {
		t.Fatalf("three sequences on 4 lanes: %v, want 3 runs", gs)
	}
	// With no run overhead every distinct length is its own run.
	if gs := partition([]int{1, 1, 2, 3, 3, 3}, 0, 1); !slices.Equal(gs, []group{{0, 2}, {2, 3}, {3, 6}}) {
		t.Fatalf("free runs: %v", gs)
	}
}

// The cut is optimal: no other way of cutting the sorted lengths (all 2^(n-1)
// of them, for small n) costs less.
func TestPartitionIsOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		n := 1 + rng.IntN(12)
		lengths := sortedLengths(rng, n, 80)
		overhead := rng.IntN(40)
		gs := partition(lengths, overhead, 1)
		checkCover(t, lengths, gs)
		got := totalCost(lengths, gs, overhead)
		for mask := range 1 << (n - 1) {
			var alt []group
			start := 0
			for i := 1; i < n; i++ {
				if mask&(1<<(i-1)) != 0 {
					alt = append(alt, group{start, i})
					start = i
				}
			}
			alt = append(alt, group{start, n})
			if c := totalCost(lengths, alt, overhead); c < got {
				t.Fatalf("lengths %v overhead %d: partition %v costs %d, %v costs %d", lengths, overhead, gs, got, alt, c)
			}
		}
	}
}

// A large batch of equal lengths is cut into groups of maxGroupSeqs, quickly.
func TestPartitionLargeBatch(t *testing.T) {
	lengths := slices.Repeat([]int{3}, 8000)
	gs := partition(lengths, runOverhead, 1)
	checkCover(t, lengths, gs)
	if want := (len(lengths) + maxGroupSeqs - 1) / maxGroupSeqs; len(gs) != want {
		t.Fatalf("%d equal sequences: %d groups, want %d", len(lengths), len(gs), want)
	}
}

func TestPartitionFillsLanes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		n := 1 + rng.IntN(64)
		lengths := sortedLengths(rng, n, 128)
		lanes := 1 + rng.IntN(6)
		gs := partition(lengths, runOverhead, lanes)
		checkCover(t, lengths, gs)
		if want := min(lanes, n); len(gs) < want {
			t.Fatalf("%d sequences on %d lanes: %d runs %v", n, lanes, len(gs), gs)
		}
	}
}

func TestLaneSplit(t *testing.T) {
	for _, tc := range []struct {
		threads, lanes int
		bytes          int64
		wantLanes      int
		wantThreads    int
	}{
		{2, 0, 90 << 20, 2, 1},
		{1, 0, 90 << 20, 1, 1},
		{8, 0, 90 << 20, 4, 2},
		{16, 0, 90 << 20, 4, 4},
		{6, 0, 90 << 20, 4, 1},
		{2, 0, 600 << 20, 1, 2}, // a large model gets no automatic lanes
		{2, 2, 600 << 20, 2, 1}, // unless asked for
		{2, 1, 90 << 20, 1, 2},
		{2, 8, 90 << 20, 2, 1}, // no more lanes than threads
		{16, 8, 90 << 20, 8, 2},
	} {
		l, th := LaneSplit(tc.threads, tc.lanes, tc.bytes)
		if l != tc.wantLanes || th != tc.wantThreads {
			t.Errorf("LaneSplit(%d, %d, %d) = %d lanes of %d threads, want %d of %d",
				tc.threads, tc.lanes, tc.bytes, l, th, tc.wantLanes, tc.wantThreads)
		}
	}
}
