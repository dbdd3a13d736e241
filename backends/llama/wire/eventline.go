package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/jsonstr"
)

// The event line of /generate is written and read once per generated token,
// so the plain token's event (no tool calls, logprobs, error, stop string or
// reasoning count: nearly every event of a stream) is encoded and parsed here by hand, without
// reflection or allocation besides the event's text; every other event goes
// through encoding/json. The bytes are EncodeLine's for FromEvent(ev), and
// ParseEventLine gives what json.Unmarshal into an Event and ToEvent give
// (tests hold both to it).

// AppendEventLine appends ev's line (JSON and a newline) to b.
func AppendEventLine(b []byte, ev backends.Event) ([]byte, error) {
	if len(ev.ToolCalls) > 0 || ev.Logprobs != nil || ev.Err != nil || ev.Stop != "" || ev.Usage.ReasoningTokens != 0 {
		var buf bytes.Buffer
		if err := EncodeLine(&buf, FromEvent(ev)); err != nil {
			return b, err
		}
		return append(b, buf.Bytes()...), nil
	}
	b = append(b, `{"Token":`...)
	b = strconv.AppendInt(b, int64(ev.Token), 10)
	b = append(b, `,"Text":`...)
	b = appendString(b, ev.Text)
	if ev.Reasoning != "" {
		b = append(b, `,"Reasoning":`...)
		b = appendString(b, ev.Reasoning)
	}
	if ev.Index != 0 {
		b = append(b, `,"Index":`...)
		b = strconv.AppendInt(b, int64(ev.Index), 10)
	}
	b = append(b, `,"Done":`...)
	b = strconv.AppendBool(b, ev.Done)
	b = append(b, `,"Finish":`...)
	b = appendString(b, string(ev.Finish))
	b = append(b, `,"Usage":{"PromptTokens":`...)
	b = strconv.AppendInt(b, int64(ev.Usage.PromptTokens), 10)
	b = append(b, `,"CompletionTokens":`...)
	b = strconv.AppendInt(b, int64(ev.Usage.CompletionTokens), 10)
	b = append(b, `,"CachedTokens":`...)
	b = strconv.AppendInt(b, int64(ev.Usage.CachedTokens), 10)
	return append(b, "}}\n"...), nil
}

func appendString(b []byte, s string) []byte { return jsonstr.Append(b, s, false) }

// ParseEventLine reads one event line (with or without its newline).
func ParseEventLine(line []byte) (backends.Event, error) {
	if ev, ok := parsePlainEvent(line); ok {
		return ev, nil
	}
	var we Event
	if err := json.Unmarshal(line, &we); err != nil {
		return backends.Event{}, err
	}
	return we.ToEvent(), nil
}

// parsePlainEvent parses the lines AppendEventLine writes by hand; ok is
// false for anything else (escapes in a string included), which the
// caller leaves to encoding/json.
func parsePlainEvent(line []byte) (ev backends.Event, ok bool) {
	p := eventParser{b: bytes.TrimRight(line, "\n")}
	var n int64
	if n, ok = p.intField(`{"Token":`); !ok || n != int64(int32(n)) {
		return ev, false
	}
	ev.Token = int32(n)
	if ev.Text, ok = p.stringField(`,"Text":`); !ok {
		return ev, false
	}
	if p.peek(`,"Reasoning":`) {
		if ev.Reasoning, ok = p.stringField(`,"Reasoning":`); !ok || ev.Reasoning == "" {
			return ev, false
		}
	}
	if p.peek(`,"Index":`) {
		if n, ok = p.intField(`,"Index":`); !ok || n == 0 {
			return ev, false
		}
		ev.Index = int(n)
	}
	switch {
	case p.lit(`,"Done":true`):
		ev.Done = true
	case p.lit(`,"Done":false`):
	default:
		return ev, false
	}
	var finish string
	if finish, ok = p.stringField(`,"Finish":`); !ok {
		return ev, false
	}
	ev.Finish = backends.FinishReason(finish)
	fields := []struct {
		key string
		v   *int
	}{
		{`,"Usage":{"PromptTokens":`, &ev.Usage.PromptTokens},
		{`,"CompletionTokens":`, &ev.Usage.CompletionTokens},
		{`,"CachedTokens":`, &ev.Usage.CachedTokens},
	}
	for _, f := range fields {
		if n, ok = p.intField(f.key); !ok {
			return ev, false
		}
		*f.v = int(n)
	}
	return ev, p.lit("}}") && len(p.b) == 0
}

// eventParser consumes the bytes of one line from the front.
type eventParser struct{ b []byte }

func (p *eventParser) peek(s string) bool { return bytes.HasPrefix(p.b, []byte(s)) }

func (p *eventParser) lit(s string) bool {
	if !p.peek(s) {
		return false
	}
	p.b = p.b[len(s):]
	return true
}

// intField reads key then a decimal integer as AppendInt writes it.
func (p *eventParser) intField(key string) (int64, bool) {
	if !p.lit(key) {
		return 0, false
	}
	i, neg := 0, false
	if i < len(p.b) && p.b[i] == '-' {
		i, neg = 1, true
	}
	var n int64
	digits := 0
	for ; i < len(p.b) && p.b[i] >= '0' && p.b[i] <= '9'; i++ {
		n = n*10 + int64(p.b[i]-'0')
		digits++
	}
	// AppendInt's form only: no leading zeros, and short of overflow.
	if digits == 0 || digits > 18 || (digits > 1 && p.b[i-digits] == '0') {
		return 0, false
	}
	if neg {
		n = -n
	}
	p.b = p.b[i:]
	return n, true
}

// stringField reads key then a string without escapes in valid UTF-8.
func (p *eventParser) stringField(key string) (string, bool) {
	if !p.lit(key) || !p.lit(`"`) {
		return "", false
	}
	end := -1
	for i, c := range p.b {
		if c == '"' {
			end = i
			break
		}
		if c == '\\' || c < 0x20 {
			return "", false
		}
	}
	if end < 0 || !utf8.Valid(p.b[:end]) {
		return "", false
	}
	s := string(p.b[:end])
	p.b = p.b[end+1:]
	return s, true
}
