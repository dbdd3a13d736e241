package engine

import (
	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// Prompt lookup (n-gram speculative decoding). A sequence's history (its
// prompt and the output so far) often says what comes next: a rewrite
// repeats a passage of the prompt, a patch quotes the lines it edits, a
// tool's output is quoted back. The draft is what followed the latest
// earlier occurrence of the history's last few tokens; the decode step
// carries it behind the sequence's next token, and the model's own choice
// at each position (speculate.go) keeps the drafted tokens up to the first
// it would not have chosen. The model sees every kept token as it would
// without the draft, so what is generated does not change; what changes is
// how many steps it takes.
//
// A step of k+1 tokens costs about one token on a CPU while decode is
// bound by reading the weights (docs/PERFORMANCE.md measures it), so a
// draft pays when some of it is kept. Where little is kept (free text),
// the sequence stops drafting (lookupState.allow).

// Lookup tuning.
const (
	// lookupMaxN and lookupMinN bound the n-gram matched: the longest of
	// the history's last lookupMaxN..lookupMinN tokens found earlier wins.
	lookupMaxN = 4
	lookupMinN = 2
	// lookupWindow is how many drafted tokens the acceptance is judged on
	// (from the first draft on, then over each later window).
	lookupWindow = 32
	// lookupMinAccept is the kept share of a window's drafted tokens below
	// which the sequence stops drafting for the rest of its request.
	lookupMinAccept = 0.35
)

// draftFrom returns up to max tokens that followed the latest earlier
// occurrence, in hist, of hist's last n tokens, for the longest n in
// lookupMaxN..lookupMinN that occurs; nil when none does. The result
// aliases hist.
func draftFrom(hist []yz.Token, max int) []yz.Token {
	if max <= 0 {
		return nil
	}
	for n := min(lookupMaxN, len(hist)-1); n >= lookupMinN; n-- {
		tail := hist[len(hist)-n:]
		// The latest match first: a rewrite in progress follows the copy
		// it is making, not the oldest one.
		for p := len(hist) - n - 1; p >= 0; p-- {
			if hist[p] != tail[0] || !equalTokens(hist[p:p+n], tail) {
				continue
			}
			from := p + n
			return hist[from:min(len(hist), from+max)]
		}
	}
	return nil
}

func equalTokens(a, b []yz.Token) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// lookupState is one request's prompt lookup: on or off, and the counts
// the decision to stop drafting reads.
type lookupState struct {
	on bool
	// max is the most tokens one step drafts.
	max int
	// drafted and kept count the tokens of the current window.
	drafted, kept int
}

// newLookup is the lookup state of a request with the model's draft size
// max (<= 0: off) and the request's own choice (nil: the model's).
func newLookup(max int, want *bool) lookupState {
	switch {
	case want != nil && !*want:
		return lookupState{}
	case max <= 0 && want != nil && *want:
		max = DefaultLookup
	case max <= 0:
		return lookupState{}
	}
	return lookupState{on: true, max: max}
}

// note records that a step drafted drafted tokens and kept kept of them,
// and turns the lookup off when a full window kept too few.
func (l *lookupState) note(drafted, kept int) {
	l.drafted += drafted
	l.kept += kept
	if l.drafted < lookupWindow {
		return
	}
	if float64(l.kept) < lookupMinAccept*float64(l.drafted) {
		l.on = false
	}
	l.drafted, l.kept = 0, 0
}
