package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends"
)

// eventCases are events of every shape a stream carries, with text that
// exercises every escape of encoding/json.
func eventCases() []backends.Event {
	texts := []string{"", " tokens", "héllo wörld 日本", "<tool_call>&</tool_call>", "a\"b\\c", "line\nnext\ttab\r",
		"\x00\x01\x1f\x7f", "\b\f", "\u2028\u2029", "bad \xff\xfe utf8 \xe6\x97", "\xe6\x97\xa5", "emoji 🦙", "/slash/"}
	var evs []backends.Event
	for i, t := range texts {
		evs = append(evs,
			backends.Event{Token: int32(1000 + i), Text: t},
			backends.Event{Token: -1, Text: t, Reasoning: t + "r", Index: i, Done: true, Finish: backends.FinishLength,
				Usage: backends.Usage{PromptTokens: 11, CompletionTokens: 256, CachedTokens: 9}})
	}
	evs = append(evs,
		backends.Event{Token: 0},
		backends.Event{Token: 2147483647, Index: 3, Finish: backends.FinishStop},
		backends.Event{Token: -2147483648},
		backends.Event{Token: 5, Text: "x", ToolCalls: []backends.ToolCallDelta{{Index: 0, ID: "call_1", Name: "f", Arguments: `{"a":1}`}}},
		backends.Event{Token: 6, Text: "y", Logprobs: &backends.Logprobs{TokenLogprob: backends.TokenLogprob{ID: 6, Bytes: []byte("y"), Logprob: -0.5},
			Top: []backends.TokenLogprob{{ID: 7, Bytes: []byte("z"), Logprob: -1.25}}}},
		backends.Event{Token: -1, Done: true, Finish: backends.FinishError, Err: errors.Join(backends.ErrBusy, errors.New("x"))},
		backends.Event{Token: -1, Done: true, Finish: backends.FinishStop, Stop: "\n\nHuman:",
			Usage: backends.Usage{PromptTokens: 3, CompletionTokens: 9, ReasoningTokens: 4}},
	)
	return evs
}

// TestEventLineKeepsStopAndReasoning: the stop string that ended a
// generation and its reasoning-token count cross the socket.
func TestEventLineKeepsStopAndReasoning(t *testing.T) {
	ev := backends.Event{Token: -1, Done: true, Finish: backends.FinishStop, Stop: "END",
		Usage: backends.Usage{PromptTokens: 3, CompletionTokens: 9, ReasoningTokens: 4}}
	line, err := AppendEventLine(nil, ev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseEventLine(line)
	if err != nil || !reflect.DeepEqual(got, ev) {
		t.Fatalf("round trip of %+v: %+v, %v (%s)", ev, got, err, line)
	}
}

// TestAppendEventLineEqualsEncodeLine: the hand-written encoder gives the
// bytes encoding/json gives, for every shape and every escape.
func TestAppendEventLineEqualsEncodeLine(t *testing.T) {
	for _, ev := range eventCases() {
		var want bytes.Buffer
		if err := EncodeLine(&want, FromEvent(ev)); err != nil {
			t.Fatal(err)
		}
		got, err := AppendEventLine([]byte("prefix"), ev)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append([]byte("prefix"), want.Bytes()...)) {
			t.Errorf("event %+v:\n got %s\nwant %s", ev, got[len("prefix"):], want.Bytes())
		}
	}
}

// TestParseEventLineEqualsUnmarshal: the hand-written parser gives what
// json.Unmarshal and ToEvent give, on the lines the encoder writes and on
// lines it does not write in that form (which go to encoding/json).
func TestParseEventLineEqualsUnmarshal(t *testing.T) {
	var lines [][]byte
	for _, ev := range eventCases() {
		line, err := AppendEventLine(nil, ev)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line, bytes.TrimSuffix(line, []byte("\n")))
	}
	lines = append(lines,
		[]byte(`{"Text":"no token first","Token":3,"Done":false,"Finish":"","Usage":{"PromptTokens":0,"CompletionTokens":0,"CachedTokens":0}}`),
		[]byte(`{"Token":3,"Text":"x","Done":false,"Finish":"","Usage":{"PromptTokens":0,"CompletionTokens":0,"CachedTokens":0},"Err":{"message":"m","kinds":["busy"]}}`),
		[]byte(`{"Token":3,"Text":"x","Index":0,"Done":false,"Finish":"","Usage":{"PromptTokens":0,"CompletionTokens":0,"CachedTokens":0}}`),
		[]byte(`{"Token":03,"Text":"x","Done":false,"Finish":"","Usage":{"PromptTokens":0,"CompletionTokens":0,"CachedTokens":0}}`),
		[]byte(`{"Token":3}`),
	)
	for _, line := range lines {
		var we Event
		if err := json.Unmarshal(line, &we); err != nil {
			if _, perr := ParseEventLine(line); perr == nil {
				t.Errorf("%s: parsed, but json.Unmarshal says %v", line, err)
			}
			continue
		}
		want := we.ToEvent()
		got, err := ParseEventLine(line)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if (got.Err == nil) != (want.Err == nil) || (got.Err != nil && got.Err.Error() != want.Err.Error()) {
			t.Errorf("%s: error %v, want %v", line, got.Err, want.Err)
		}
		got.Err, want.Err = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", line, got, want)
		}
	}
}

// TestParseEventLineRejects: what is not one JSON event is an error, as
// json.Unmarshal makes it.
func TestParseEventLineRejects(t *testing.T) {
	for _, line := range []string{"", "{", `{"Token":1,"Text":"a`, `{"Token":1,"Text":"a` + "\x01" + `","Done":false,"Finish":"","Usage":{"PromptTokens":0,"CompletionTokens":0,"CachedTokens":0}}`,
		`{"Token":1,"Text":"a","Done":false,"Finish":"","Usage":{"PromptTokens":0,"CompletionTokens":0,"CachedTokens":0}}}`, "null x"} {
		if ev, err := ParseEventLine([]byte(line)); err == nil {
			t.Errorf("%q parsed as %+v", line, ev)
		}
	}
}

// TestEventLineAllocations: a plain token's event costs no allocation to
// write into a reused buffer and one (its text) to read.
func TestEventLineAllocations(t *testing.T) {
	ev := backends.Event{Token: 1234, Text: " tokens"}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf, _ = AppendEventLine(buf[:0], ev) }); n != 0 {
		t.Errorf("AppendEventLine: %v allocations, want 0", n)
	}
	line := append([]byte(nil), buf...)
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseEventLine(line) }); n != 1 {
		t.Errorf("ParseEventLine: %v allocations, want 1", n)
	}
	if !strings.HasSuffix(string(line), "\n") {
		t.Errorf("line %q has no newline", line)
	}
}
