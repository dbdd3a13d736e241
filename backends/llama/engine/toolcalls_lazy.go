package engine

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strings"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends/toolcall"
)

// A lazy grammar (tool_choice auto): the output is free until the
// family's call marker, and from the marker on the grammar holds to the
// end. llama.cpp's own lazy grammar sampler matches its trigger patterns
// with std::regex_match over the whole output so far, at every token, so
// a generation costs time quadratic in its length (profiled with perf: in
// two 800-token runs of the random-weight Qwen2.5 test, 90% of the time
// went to libstdc++'s regex executor; 73 s, against 10 s with the watch
// below). So the trigger is watched here instead, on the bytes of the last
// tokens only, and the grammar is then built, advanced over the text from
// the marker on and joined into the sequence's chain at the grammar's
// place (an empty chain held there from the start). Per token before the
// trigger that is a look-up of the token's piece (rendered once per token
// id for the decoder's life), a copy and a substring search per marker:
// no allocation, cost bounded by the markers' length. After the trigger
// the grammar sampler does the work, as under tool_choice required.

// startBytes bounds the output a start pattern (a call that only the start
// of the output can hold: Llama 3's bare JSON, the generic object) is
// checked over.
const startBytes = 96

// recentTokens bounds the tokens a trigger's text is taken from.
const recentTokens = 64

// lazyTrigger is what starts a lazy grammar: markers anywhere in the
// output, or a pattern over its start. It is immutable, shared by the
// sequences of one request.
type lazyTrigger struct {
	words [][]byte
	// start matches the whole output so far; its first group begins
	// where the grammar's text does.
	start   *regexp.Regexp
	maxWord int
}

// newLazyTrigger is the trigger of fam's calls.
func newLazyTrigger(fam toolcall.Family) (*lazyTrigger, error) {
	trig, err := fam.Triggers()
	if err != nil {
		return nil, err
	}
	lt := &lazyTrigger{}
	for _, t := range trig {
		switch t.Kind {
		case toolcall.TriggerWord:
			lt.words = append(lt.words, []byte(t.Value))
			lt.maxWord = max(lt.maxWord, len(t.Value))
		case toolcall.TriggerPatternFull:
			if lt.start != nil {
				return nil, fmt.Errorf("engine: %s has more than one start pattern", fam)
			}
			re, err := regexp.Compile(`^(?:` + t.Value + `)$`)
			if err != nil {
				return nil, fmt.Errorf("engine: %s's start pattern: %w", fam, err)
			}
			lt.start = re
		default:
			return nil, fmt.Errorf("engine: %s: unknown trigger kind %d", fam, t.Kind)
		}
	}
	if len(lt.words) == 0 && lt.start == nil {
		return nil, fmt.Errorf("engine: %s has no call trigger", fam)
	}
	return lt, nil
}

// lazyWatch is a decoder's watch of lazy grammars' triggers: one per
// sequence, and the pieces of the tokens seen so far (control tokens as
// text), rendered once each for the decoder's life, so that watching
// costs no call into llama.cpp and no allocation per token.
type lazyWatch struct {
	seqs   []*lazySeq
	pieces [][]byte // by token id; nil: not rendered yet
	// ahead gives the tables made while the context was (vocab_ahead.go);
	// nil once taken, or when none are made. u8v is the UTF-8 guard's.
	ahead chan vocabTables
	u8v   *utf8Vocab
}

// seq is sequence i's watch, nil when it has none.
func (w *lazyWatch) seq(i int) *lazySeq {
	if i < len(w.seqs) {
		return w.seqs[i]
	}
	return nil
}

// piece is tok's piece, control tokens as text.
func (w *lazyWatch) piece(m *Model, tok yz.Token) []byte {
	if w.pieces == nil {
		w.take()
	}
	if w.pieces == nil {
		w.pieces = make([][]byte, m.nVocab)
	}
	if tok < 0 || int(tok) >= len(w.pieces) {
		return nil
	}
	p := w.pieces[tok]
	if p == nil {
		p = []byte(m.piece(tok, true))
		if len(p) == 0 {
			p = []byte{}
		}
		w.pieces[tok] = p
	}
	return p
}

// lazySeq is one sequence's watch for its lazy grammar's trigger. Only the
// scheduler goroutine touches it.
type lazySeq struct {
	m     *Model
	w     *lazyWatch
	text  string // the grammar, rooted at grammarRoot, of the text from the trigger on
	trig  *lazyTrigger
	stage yz.Sampler // the empty chain in the sequence's chain that the grammar joins
	done  bool       // triggered: nothing more to watch
	out   int        // output bytes so far
	// win holds the pieces of toks, in order: the last tokens, at least
	// enough of them to hold a marker's length less one byte (the whole
	// output while a start pattern may still match).
	win        []byte
	toks       [recentTokens]yz.Token
	lens       [recentTokens]int
	ntok       int
	dropped    bool // the window has lost the output's first token
	startTried bool // the start pattern matched once (or the start is past)
	// thinking: inside a reasoning block; mayOpen: the output may still
	// open one (it is whitespace or a prefix of <think> so far); floor:
	// where the window's text after the block begins.
	thinking, mayOpen bool
	floor             int
	fired             bool // the grammar joined the chain
}

// lazyStart returns grammar as seq samples it: a lazy one gets its empty
// stage chain and seq the watch of its trigger (lazyAccept); any other
// clears seq's watch.
func (d *llamaDecoder) lazyStart(seq int, grammar constraint) constraint {
	w := &d.lazy
	for len(w.seqs) <= seq {
		w.seqs = append(w.seqs, nil)
	}
	w.seqs[seq] = nil
	if grammar.trig == nil {
		return grammar
	}
	ls := &lazySeq{m: d.m, w: w, text: grammar.text, trig: grammar.trig,
		stage:    yz.SamplerChainInit(yz.SamplerChainDefaultParams()),
		win:      make([]byte, 0, 2*startBytes+2*grammar.trig.maxWord+2*len(thinkClose)),
		thinking: grammar.think == reasonInside, mayOpen: grammar.think == reasonMayOpen}
	grammar.stage = ls.stage
	w.seqs[seq] = ls
	return grammar
}

// lazyAccept watches seq's output for its trigger after tok was sampled
// and accepted by seq's chain.
func (d *llamaDecoder) lazyAccept(seq int, tok yz.Token) {
	if ls := d.lazy.seq(seq); ls != nil && !ls.done {
		ls.accept(tok)
	}
}

// accept adds tok to the watch and, when it completes a trigger, joins the
// grammar to the chain. Inside a reasoning block no trigger counts: the
// watch resumes after its </think>.
func (ls *lazySeq) accept(tok yz.Token) {
	p := ls.w.piece(ls.m, tok)
	n := len(p)
	if ls.ntok == recentTokens {
		ls.dropFirst()
	}
	ls.win = append(ls.win, p...)
	ls.toks[ls.ntok], ls.lens[ls.ntok] = tok, n
	ls.ntok++
	ls.out += n
	whole := ls.out-n < startBytes && !ls.dropped // the window holds the whole output
	if ls.mayOpen {
		switch t := bytes.TrimLeft(ls.win, " \t\r\n"); {
		case !whole:
			ls.mayOpen = false
		case bytes.HasPrefix(t, thinkOpenBytes):
			ls.mayOpen, ls.thinking, ls.startTried = false, true, true
		case !bytes.HasPrefix(thinkOpenBytes, t):
			ls.mayOpen = false
		}
	}
	if ls.thinking {
		from := max(ls.floor, len(ls.win)-n-len(thinkClose)+1)
		k := bytes.Index(ls.win[from:], thinkCloseBytes)
		if k < 0 {
			ls.trim()
			return
		}
		ls.thinking, ls.floor = false, from+k+len(thinkClose)
	}
	// A marker that ends in this piece (after the reasoning).
	from := max(ls.floor, len(ls.win)-n-ls.trig.maxWord+1)
	for _, w := range ls.trig.words {
		if k := bytes.Index(ls.win[from:], w); k >= 0 {
			if ls.fire(from + k) {
				return
			}
		}
	}
	// While the window holds the whole output, the start pattern.
	if whole && ls.trig.start != nil && !ls.startTried && ls.trig.start.Match(ls.win) {
		ls.startTried = true // one try: a start that breaks the grammar stays text
		if g := ls.trig.start.FindSubmatchIndex(ls.win); len(g) >= 4 && g[2] >= 0 && ls.fire(g[2]) {
			return
		}
	}
	if whole && ls.out < startBytes {
		return
	}
	ls.trim()
}

var (
	thinkOpenBytes  = []byte(thinkOpen)
	thinkCloseBytes = []byte(thinkClose)
)

// trim keeps the whole tokens that cover at least the longest text a
// later piece may complete (a marker's length, or </think>'s, less one
// byte).
func (ls *lazySeq) trim() {
	keep := max(ls.trig.maxWord, len(thinkClose)) - 1
	for ls.ntok > 1 && len(ls.win)-ls.lens[0] >= keep {
		ls.dropFirst()
	}
}

// dropFirst removes the window's first token.
func (ls *lazySeq) dropFirst() {
	k := ls.lens[0]
	copy(ls.win, ls.win[k:])
	ls.win = ls.win[:len(ls.win)-k]
	copy(ls.toks[:], ls.toks[1:ls.ntok])
	copy(ls.lens[:], ls.lens[1:ls.ntok])
	ls.ntok--
	ls.dropped = true
	ls.floor = max(0, ls.floor-k)
}

// fire builds the grammar, advances it over the tokens generated from the
// one holding byte at of the window on (the text of that token before at
// is the grammar's lazy prefix), and joins it to the chain. False, the
// grammar dropped, when that text breaks the grammar: the marker is then
// followed by what is not a call of the family, and stays text.
func (ls *lazySeq) fire(at int) bool {
	g := yz.SamplerInitGrammar(ls.m.vocab, ls.text, grammarRoot)
	if g == 0 {
		return false // Generate checked that the grammar parses: cannot happen
	}
	first, pos := 0, 0
	for first < ls.ntok && pos+ls.lens[first] <= at {
		pos += ls.lens[first]
		first++
	}
	if !grammarTakes(g, ls.toks[first:ls.ntok]) {
		yz.SamplerFree(g)
		return false
	}
	yz.SamplerChainAdd(ls.stage, g)
	ls.fired, ls.done = true, true
	return true
}

// grammarTakes advances grammar g over toks, each checked first: false at
// the first one g forbids (g is then left after the ones before it).
func grammarTakes(g yz.Sampler, toks []yz.Token) bool {
	for _, tok := range toks {
		td := yz.TokenData{Id: tok}
		arr := yz.TokenDataArray{Data: &td, Size: 1, Selected: -1}
		yz.SamplerApply(g, &arr)
		if math.IsInf(float64(td.Logit), -1) {
			return false
		}
		yz.SamplerAccept(g, tok)
	}
	return true
}

// lazyGrammar is grammar (rooted at grammarRoot, the root rule its first
// line) as the lazy grammar of trig: the same text after a prefix of up
// to lazyPrefix bytes that holds no first byte of trig's markers (nor
// "{" when trig has a start pattern). The prefix takes what the token
// that begins the marker holds before it.
func lazyGrammar(grammar string, trig *lazyTrigger) (string, bool) {
	rest, ok := strings.CutPrefix(grammar, grammarRoot+" ::= ")
	if !ok {
		return "", false
	}
	var class strings.Builder
	seen := map[byte]bool{}
	add := func(c byte) {
		if !seen[c] {
			seen[c] = true
			fmt.Fprintf(&class, `\x%02X`, c)
		}
	}
	for _, w := range trig.words {
		add(w[0])
	}
	if trig.start != nil {
		add('{')
	}
	return fmt.Sprintf("%s ::= lazy-prefix lazy-body\nlazy-prefix ::= [^%s]{0,%d}\nlazy-body ::= %s",
		grammarRoot, class.String(), lazyPrefix, rest), true
}

// lazyPrefix bounds the text before a marker inside its first token.
const lazyPrefix = 64
