package engine

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/wire"
	"github.com/modeld/modeld/backends/toolcall"
	"github.com/modeld/modeld/internal/utf8text"
)

// FuzzUTF8Stream: whatever bytes a model emits and however its tokens
// split them, the text streamed token by token (the engine's assembler,
// stop strings included, then the runner's event line as the daemon reads
// it) and the tool-call arguments streamed as deltas are valid UTF-8 and
// equal, byte for byte, to the non-streamed assembly of the whole output
// (utf8text.Valid of its bytes, cut at the first stop string; a tool call
// parsed from that whole text). data is the output's bytes; each byte of
// cuts is the length (1 to 6) of the next token's piece.
func FuzzUTF8Stream(f *testing.F) {
	seeds := []struct{ data, cuts string }{
		{"Paris\xfc\x89\x88\x98", "\x05\x01\x02\x01"}, // the reported bytes, split as a model split them
		{"\xfc\x89\x88\x98", ""},
		{"€uro", "\x01\x01\x01\x01"},                 // a character split over three tokens
		{"🙂 ok", "\x01\x01\x01\x01\x02"},             // four bytes over four tokens
		{"\xc0\xaf\xe0\x80\x80/", "\x01\x02"},        // overlong forms
		{"\xed\xa0\x80\xed\xbf\xbf", "\x02\x02\x02"}, // surrogates encoded in UTF-8
		{"\xf4\x90\x80\x80\xf5\xff", "\x03\x03"},     // over U+10FFFF, bytes never valid
		{"\x80\x80\xbfa", "\x01"},                    // stray continuation bytes
		{"ab</s>cd", "\x03\x03"},                     // a stop string cut over two tokens
		{"x\xe2\x82</s>", "\x02\x02"},                // an incomplete character before a stop string
		{"€!€", "\x02\x02\x02"},                      // a multi-byte stop string
	}
	for _, s := range seeds {
		f.Add([]byte(s.data), []byte(s.cuts))
	}
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		if len(data) > 4096 {
			return
		}
		for _, stops := range [][]string{nil, {"</s>"}, {"€!"}} {
			checkTextAssembly(t, data, cuts, stops)
		}
		checkToolArguments(t, data, cuts)
	})
}

// pieces splits data into token pieces of the lengths cuts gives (its
// bytes in turn, 1 to 6 each, cycling); no cuts: one piece.
func pieces(data, cuts []byte) []string {
	if len(cuts) == 0 {
		return []string{string(data)}
	}
	var out []string
	for i, k := 0, 0; i < len(data); k++ {
		n := min(int(cuts[k%len(cuts)])%6+1, len(data)-i)
		out = append(out, string(data[i:i+n]))
		i += n
	}
	return out
}

// wholeText is the non-streamed assembly: the whole output's bytes, cut
// at the first stop string, as text.
func wholeText(data []byte, stops []string) (string, bool) {
	at := -1
	for _, s := range stops {
		if i := bytes.Index(data, []byte(s)); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at >= 0 {
		return utf8text.Valid(data[:at]), true
	}
	return utf8text.Valid(data), false
}

// streamText runs pieces through the engine's assembler and every
// released chunk through the runner's event line as the daemon parses it.
func streamText(t *testing.T, ps []string, stops []string) ([]string, bool) {
	t.Helper()
	a := newTextAssembler(stops)
	var chunks []string
	relay := func(text string, done bool) {
		line, err := wire.AppendEventLine(nil, backends.Event{Token: 1, Text: text, Done: done})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := wire.ParseEventLine(line)
		if err != nil {
			t.Fatalf("the event line of %q does not parse: %v", text, err)
		}
		if ev.Text != text {
			t.Fatalf("the runner's wire changed %q into %q", text, ev.Text)
		}
		chunks = append(chunks, ev.Text)
	}
	for _, p := range ps {
		out, stopped := a.push(p)
		relay(out, stopped)
		if stopped {
			return chunks, true
		}
	}
	relay(a.flush(), true)
	return chunks, false
}

func checkTextAssembly(t *testing.T, data, cuts []byte, stops []string) {
	t.Helper()
	ps := pieces(data, cuts)
	chunks, stopped := streamText(t, ps, stops)
	for _, c := range chunks {
		if !utf8.ValidString(c) {
			t.Fatalf("stops %q, pieces %q: streamed a chunk %q that is not UTF-8", stops, ps, c)
		}
	}
	streamed := strings.Join(chunks, "")
	whole, wholeStopped := wholeText(data, stops)
	if streamed != whole || stopped != wholeStopped {
		t.Fatalf("stops %q, pieces %q:\nstreamed     %q (stop %v)\nnon-streamed %q (stop %v)", stops, ps, streamed, stopped, whole, wholeStopped)
	}
	// A runner that sends bytes that are not UTF-8 has them replaced by
	// the same rule on the daemon's side.
	line, err := wire.AppendEventLine(nil, backends.Event{Token: 1, Text: string(data)})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := wire.ParseEventLine(line); err != nil || ev.Text != utf8text.Valid(data) {
		t.Fatalf("raw bytes %q over the wire became %q (%v), want %q", data, ev.Text, err, utf8text.Valid(data))
	}
}

// checkToolArguments: data as a tool call's string argument (the bytes
// that would end the JSON string made plain), streamed through the
// assembler and the family's stream parser, against the parse of the
// whole output.
func checkToolArguments(t *testing.T, data, cuts []byte) {
	t.Helper()
	arg := make([]byte, len(data))
	for i, c := range data {
		if c == '"' || c == '\\' || c < 0x20 {
			c = 'x'
		}
		arg[i] = c
	}
	out := []byte(`<tool_call>` + "\n" + `{"name": "get_weather", "arguments": {"city": "`)
	out = append(out, arg...)
	out = append(out, `"}}`+"\n"+`</tool_call>`...)
	ps := pieces(out, cuts)

	in := make(chan Event)
	go func() {
		defer close(in)
		a := newTextAssembler(nil)
		for _, p := range ps {
			text, _ := a.push(p)
			in <- Event{Token: 1, Text: text}
		}
		in <- Event{Token: -1, Text: a.flush(), Done: true, Finish: backends.FinishStop}
	}()
	var content strings.Builder
	var args []string
	var final Event
	for ev := range toolEvents(in, toolcall.Hermes) {
		content.WriteString(ev.Text)
		for _, d := range ev.ToolCalls {
			if !utf8.ValidString(d.Arguments) {
				t.Fatalf("pieces %q: an arguments delta %q is not UTF-8", ps, d.Arguments)
			}
			if d.Index == len(args) {
				args = append(args, "")
			}
			args[d.Index] += d.Arguments
		}
		if ev.Done {
			final = ev
		}
	}
	wantContent, calls, err := toolcall.Parse(toolcall.Hermes, utf8text.Valid(out), nil)
	if err != nil {
		t.Fatalf("the whole output does not parse: %v: %q", err, out)
	}
	if content.String() != wantContent || len(args) != len(calls) {
		t.Fatalf("pieces %q: streamed content %q and %d calls, the whole output %q and %d", ps, content.String(), len(args), wantContent, len(calls))
	}
	for i, c := range calls {
		if args[i] != c.Arguments || !utf8.ValidString(c.Arguments) {
			t.Fatalf("pieces %q: call %d streamed arguments %q, non-streamed %q", ps, i, args[i], c.Arguments)
		}
	}
	if final.Finish != backends.FinishToolCalls {
		t.Fatalf("pieces %q: finish %s, want tool_calls", ps, final.Finish)
	}
}
