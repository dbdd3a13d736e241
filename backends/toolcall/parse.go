package toolcall

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/modeld/modeld/backends"
)

// ErrIncomplete says the output ended inside a tool call (a generation cut
// by its token limit, typically). The calls returned with it include the
// unfinished one, its arguments as far as they were generated.
var ErrIncomplete = errors.New("toolcall: output ended inside a tool call")

// SyntaxError says the text after a call marker is not a well-formed call
// of the family. Offset is the byte offset into the output where parsing
// failed. Text from there on is neither content nor a call.
type SyntaxError struct {
	Family Family
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("toolcall: malformed %s tool call at byte %d: %s", e.Family, e.Offset, e.Msg)
}

// pcall is a call as far as it has been read.
type pcall struct {
	name  string
	named bool   // name is complete
	args  string // raw JSON text read so far
	done  bool   // the call is complete
}

// snapshot is what a prefix of the output says for sure, from a
// checkpoint on: the content and calls after it.
type snapshot struct {
	content string
	calls   []pcall
	err     error
	// next, when hasNext, is a later checkpoint; contentAt is how much of
	// content lies before it.
	next      checkpoint
	hasNext   bool
	contentAt int
}

// checkpoint is a point of the output up to which everything is decided,
// so that a scan of a longer output can resume there: the top of the
// scan loop, with the state of the content rules.
type checkpoint struct {
	i      int
	ws     string
	after  bool
	ncalls int // calls before i
}

// scanner reads one family's output. Sections are the parts of the output
// that are calls; everything else is content.
type scanner struct {
	f     *spec
	s     string
	final bool
	calls []pcall
}

// cur returns the call being read.
func (sc *scanner) cur() *pcall { return &sc.calls[len(sc.calls)-1] }

// scan reads s (the whole output so far; final when nothing follows).
//
// Content is the text outside sections, with two rules that keep streaming
// and complete parses equal: text that could be the start of a marker is
// held until it is known not to be one, and whitespace right before a
// section or right after one (up to the next content or the end) is
// dropped. A marker followed by text that is not a call of the family
// (stNo) is content; one followed by a malformed call is an error.
//
// A scan from checkpoint cp (nil: from the start) gives what a scan from
// the start gives after cp. sc, when not nil, is a scanner to reuse (its
// calls are overwritten: the snapshot's calls are valid until the next
// scan with it).
func scan(f *spec, s string, final bool, cp *checkpoint, sc *scanner) snapshot {
	if sc == nil {
		sc = &scanner{}
	}
	*sc = scanner{f: f, s: s, final: final, calls: sc.calls[:0]}
	var content strings.Builder
	var ws string       // whitespace held: emitted before later content, dropped before a section
	after := false      // the last thing read was a section
	var next checkpoint // a value: a pointer would cost an allocation a Feed
	hasNext := false
	contentAt := 0
	mark := func(i int) {
		next, hasNext = checkpoint{i: i, ws: ws, after: after, ncalls: len(sc.calls)}, true
		if cp != nil {
			next.ncalls += cp.ncalls
		}
		contentAt = content.Len()
	}
	emit := func(t string) {
		if after {
			t = strings.TrimLeft(t, " \t\r\n")
		}
		if t == "" {
			return
		}
		trimmed := strings.TrimRight(t, " \t\r\n")
		if trimmed == "" {
			ws += t
			return
		}
		content.WriteString(ws)
		content.WriteString(trimmed)
		ws = t[len(trimmed):]
		after = false
	}
	snap := func(err error) snapshot {
		if final && !after && err == nil {
			content.WriteString(ws)
		}
		return snapshot{content: content.String(), calls: sc.calls, err: err, next: next, hasNext: hasNext, contentAt: contentAt}
	}
	i := 0
	if cp != nil {
		i, ws, after = cp.i, cp.ws, cp.after
	} else if f.start != nil {
		j := skipWSIf(s, 0, f.startSkipsWS)
		end, st := f.start(sc, j)
		switch st {
		case stMore:
			if final && len(sc.calls) == 0 {
				break // the output ended before it was a call: content
			}
			if final {
				return snap(ErrIncomplete)
			}
			// Either nothing is decided yet (hold everything) or a call
			// is being read.
			after = true
			return snap(nil)
		case stBad:
			after = true
			return snap(&SyntaxError{Family: f.family, Offset: end, Msg: "malformed call at the start of the output"})
		case stOK:
			i, after = end, true
		default:
			sc.calls = nil
		}
	}
	for {
		mark(i)
		j, m := f.nextMarker(s, i)
		if m == "" {
			tail := s[i:]
			if !final {
				tail = tail[:len(tail)-f.heldPrefix(tail)]
			}
			emit(tail)
			// No marker can start before the held text.
			mark(i + len(tail))
			return snap(nil)
		}
		emit(s[i:j])
		n := len(sc.calls)
		end, st := f.section(sc, j, m)
		switch st {
		case stNo:
			sc.calls = sc.calls[:n]
			emit(s[j : j+len(m)])
			i = j + len(m)
			continue
		case stMore:
			if final && len(sc.calls) == n {
				// The output ended before the marker began a call: content.
				emit(s[j:])
				return snap(nil)
			}
			if final {
				return snap(ErrIncomplete)
			}
			if len(sc.calls) == n {
				// Not yet known whether this is a call: hold it.
				return snap(nil)
			}
			ws, after = "", true
			return snap(nil)
		case stBad:
			ws, after = "", true
			return snap(&SyntaxError{Family: f.family, Offset: end, Msg: "text after " + m + " is not a call"})
		}
		ws, after = "", true
		i = end
	}
}

func skipWSIf(s string, i int, skip bool) int {
	if skip {
		return skipWS(s, i)
	}
	return i
}

// IDFunc gives the ID of the call with the given index in one output.
type IDFunc func(index int) string

// RandomID is an IDFunc: "call_" and 24 random hex digits.
func RandomID(int) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "call_" + hex.EncodeToString(b[:])
}

// RandomAlnum9 is an IDFunc: 9 random letters and digits, the only IDs
// the Mistral templates accept when a later turn sends the call back.
func RandomAlnum9(int) string {
	const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var b [9]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = chars[int(b[i])%len(chars)]
	}
	return string(b[:])
}

// DefaultID is the IDFunc that Parse and NewStream use when given none:
// RandomAlnum9 for Mistral, RandomID for the others.
func (f Family) DefaultID() IDFunc {
	if f == Mistral {
		return RandomAlnum9
	}
	return RandomID
}

// Parse splits a complete output of family f into its content and its tool
// calls. A nil id uses f.DefaultID(). On error the content and the calls read
// before the error are returned with it: ErrIncomplete for a cut call, a
// *SyntaxError for a malformed one.
func Parse(f Family, text string, id IDFunc) (string, []backends.ToolCall, error) {
	sp, err := f.spec()
	if err != nil {
		return "", nil, err
	}
	if id == nil {
		id = f.DefaultID()
	}
	sn := scan(sp, text, true, nil, nil)
	var calls []backends.ToolCall
	for i, c := range sn.calls {
		if !c.named {
			break
		}
		calls = append(calls, backends.ToolCall{ID: id(i), Name: c.name, Arguments: c.args})
	}
	return sn.content, calls, sn.err
}

// Stream parses an output of one family as it is generated. Feed it the
// text as it comes and call Close at the end. The content deltas and
// tool-call deltas it returns concatenate to exactly what Parse returns for
// the whole text: text that could be the start of a call marker is held
// back until it is known not to be one, a call's first delta (with ID and
// Name) comes once its name is complete, and its arguments follow as they
// are generated. A Stream is not safe for concurrent use.
type Stream struct {
	f     *spec
	id    IDFunc
	buf   strings.Builder
	cp    checkpoint // where the next scan resumes, when hasCP (else the start)
	hasCP bool
	sc    scanner // reused by every scan
	sent  string  // content emitted since cp
	calls []pcall // names and arguments emitted, by index
	err   error
	close bool
}

// NewStream returns a Stream for family f; a nil id uses f.DefaultID().
func NewStream(f Family, id IDFunc) (*Stream, error) {
	sp, err := f.spec()
	if err != nil {
		return nil, err
	}
	if id == nil {
		id = f.DefaultID()
	}
	return &Stream{f: sp, id: id}, nil
}

// Feed adds generated text and returns the content and tool-call deltas it
// releases. After an error (the same Parse would return) Feed and Close
// return nothing more but the error.
func (st *Stream) Feed(text string) (string, []backends.ToolCallDelta, error) {
	if st.err != nil || st.close {
		return "", nil, st.err
	}
	st.buf.WriteString(text)
	return st.step(false)
}

// Close ends the output and returns what was held back, with the error
// Parse would return for the whole text.
func (st *Stream) Close() (string, []backends.ToolCallDelta, error) {
	if st.err != nil || st.close {
		return "", nil, st.err
	}
	c, d, err := st.step(true)
	st.close = true
	return c, d, err
}

func (st *Stream) step(final bool) (string, []backends.ToolCallDelta, error) {
	var cp *checkpoint
	if st.hasCP {
		cp = &st.cp
	}
	sn := scan(st.f, st.buf.String(), final, cp, &st.sc)
	content := ""
	if strings.HasPrefix(sn.content, st.sent) {
		content = sn.content[len(st.sent):]
		st.sent = sn.content
	}
	base := 0
	if st.hasCP {
		base = st.cp.ncalls
	}
	var deltas []backends.ToolCallDelta
	for k, c := range sn.calls {
		if !c.named {
			break
		}
		i := base + k
		d := backends.ToolCallDelta{Index: i}
		if i >= len(st.calls) {
			st.calls = append(st.calls, pcall{name: c.name, named: true})
			d.ID, d.Name = st.id(i), c.name
		}
		prev := &st.calls[i]
		if len(c.args) > len(prev.args) && strings.HasPrefix(c.args, prev.args) {
			d.Arguments = c.args[len(prev.args):]
			prev.args = c.args
		}
		if d.ID != "" || d.Arguments != "" {
			deltas = append(deltas, d)
		}
	}
	if sn.hasNext && sn.contentAt <= len(st.sent) {
		st.sent = st.sent[sn.contentAt:]
		st.cp, st.hasCP = sn.next, true
	}
	if sn.err != nil {
		st.err = sn.err
	}
	return content, deltas, sn.err
}
