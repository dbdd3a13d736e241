package llama

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends/llama/wire"
)

// TestReadEvent: the relay's line reader gives every event of a stream in
// order, a line longer than its buffer (logprobs, tool calls) included,
// skips blank lines, and tells a stream cut mid-line (ErrUnexpectedEOF)
// from one that ended after its last line (EOF).
func TestReadEvent(t *testing.T) {
	long := strings.Repeat("x", 40<<10)
	evs := []Event{{Token: 1, Text: "a"}, {Token: 2, Text: long}, {Token: 3, Text: "<b>\n"},
		{Token: -1, Done: true, Finish: FinishLength, Usage: Usage{PromptTokens: 2, CompletionTokens: 3}}}
	var stream []byte
	for i, ev := range evs {
		var err error
		if stream, err = wire.AppendEventLine(stream, ev); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			stream = append(stream, "\n  \n"...)
		}
	}
	read := func(s string) ([]Event, error) {
		rd := bufio.NewReaderSize(strings.NewReader(s), 16) // smaller than every line
		var buf []byte
		var got []Event
		for {
			ev, err := readEvent(rd, &buf, maxEventLine)
			if err != nil {
				return got, err
			}
			got = append(got, ev)
		}
	}
	got, err := read(string(stream))
	if !errors.Is(err, io.EOF) {
		t.Fatalf("after the stream: %v, want io.EOF", err)
	}
	if len(got) != len(evs) {
		t.Fatalf("%d events, want %d", len(got), len(evs))
	}
	for i := range evs {
		if got[i].Token != evs[i].Token || got[i].Text != evs[i].Text || got[i].Done != evs[i].Done || got[i].Usage != evs[i].Usage {
			t.Errorf("event %d: %+v, want %+v", i, got[i].Token, evs[i].Token)
		}
	}
	// The last line without its newline is still an event.
	if got, err = read(strings.TrimSuffix(string(stream), "\n")); len(got) != len(evs) || !errors.Is(err, io.EOF) {
		t.Errorf("without the last newline: %d events, %v", len(got), err)
	}
	// Cut inside a line.
	cut := string(stream[:len(stream)-20])
	if got, err = read(cut); len(got) != len(evs)-1 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut mid-line: %d events, %v; want %d and io.ErrUnexpectedEOF", len(got), err, len(evs)-1)
	}
	// A line that is not an event is an error, not an event.
	if _, err = read("{\"Token\":1,\"Text\":\"a\"}x\n"); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("a malformed line gave %v", err)
	}
}
