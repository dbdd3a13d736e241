package pipelines

// runOverhead is what one session run costs beyond its tokens, in padded-token
// equivalents: mostly streaming the weights once more. Measured on a 6-layer,
// 384-wide BERT with ONNX Runtime 1.30.0 (2 threads): a run of b sequences of L
// tokens takes about 1.4 ms + 83 µs·b·L, so one run costs as much as 17 padded
// tokens. Both terms grow with the model's size, so the ratio carries over to
// other encoder sizes.
const runOverhead = 16

// maxGroupSeqs bounds the sequences of one group, which keeps the search
// linear in the batch: past it, one more run costs under 1/maxGroupSeqs of a
// token per sequence.
const maxGroupSeqs = 256

// group is one session run of a merged batch: the sequences at [start, end) of
// the length-sorted order, padded to the longest of them.
type group struct{ start, end int }

// partition cuts the ascending sequence lengths into contiguous groups of at
// most maxGroupSeqs that minimize the estimated cost Σ (overhead + size ×
// longest) of running them, each group one padded session run. With minGroups > 1 (parallel lanes), the
// costliest groups are halved until there are that many, when the sequences
// allow, so that no lane idles. The groups come back in ascending order.
func partition(lengths []int, overhead, minGroups int) []group {
	n := len(lengths)
	if n == 0 {
		return nil
	}
	// best[j] is the least cost of running the first j sequences; cut[j] where the
	// last group of that solution starts.
	best := make([]int, n+1)
	cut := make([]int, n+1)
	for j := 1; j <= n; j++ {
		best[j] = -1
		// On a tie, the longest last group: fewer runs.
		for i := max(0, j-maxGroupSeqs); i < j; i++ {
			c := best[i] + overhead + (j-i)*lengths[j-1]
			if best[j] < 0 || c < best[j] {
				best[j], cut[j] = c, i
			}
		}
	}
	var gs []group
	for j := n; j > 0; j = cut[j] {
		gs = append(gs, group{cut[j], j})
	}
	for l, r := 0, len(gs)-1; l < r; l, r = l+1, r-1 {
		gs[l], gs[r] = gs[r], gs[l]
	}
	for len(gs) < minGroups {
		// Halve the costliest group that has two sequences or more.
		k, worst := -1, 0
		for i, g := range gs {
			if c := (g.end - g.start) * lengths[g.end-1]; g.end-g.start > 1 && c > worst {
				k, worst = i, c
			}
		}
		if k < 0 {
			break
		}
		g := gs[k]
		mid := (g.start + g.end) / 2
		gs = append(gs[:k], append([]group{{g.start, mid}, {mid, g.end}}, gs[k+1:]...)...)
	}
	return gs
}

// groupCost is a group's estimated cost in padded tokens.
func groupCost(lengths []int, g group, overhead int) int {
	return overhead + (g.end-g.start)*lengths[g.end-1]
}
