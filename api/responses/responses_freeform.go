package responses

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A freeform (custom) tool's call reaches the Responses writer as the
// arguments of a function with one string argument, {"input": TEXT}; the
// writer returns TEXT, streamed as it is decoded.

// FreeformInput is the input text of a freeform call's arguments: the
// input string when they parse, else as much of it as was generated (a
// call cut short), else the arguments as they are (a call that did not
// take the arguments' shape).
func FreeformInput(args string) string {
	var v struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal([]byte(args), &v) == nil && v.Input != nil {
		return *v.Input
	}
	if text, ok := inputPrefix(args); ok {
		return text
	}
	return args
}

// PartialInput is the input text decoded from the arguments generated so
// far ("" until the string begins).
func PartialInput(args string) string {
	text, _ := inputPrefix(args)
	return text
}

// inputPrefix decodes the input string of arguments {"input": "..."} up to
// its end or the last complete character; false when args do not begin
// that way.
func inputPrefix(args string) (string, bool) {
	s := strings.TrimLeft(args, " \t\r\n")
	var ok bool
	for _, tok := range []string{"{", `"input"`, ":", `"`} {
		if s, ok = strings.CutPrefix(s, tok); !ok {
			return "", false
		}
		if tok != `"` {
			s = strings.TrimLeft(s, " \t\r\n")
		}
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			return b.String(), true
		case c != '\\':
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n <= 1 && !utf8.FullRuneInString(s[i:]) {
				return b.String(), true // a character still arriving
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		if i+1 >= len(s) {
			return b.String(), true
		}
		switch e := s[i+1]; e {
		case 'u':
			r, n, complete := unicodeEscape(s[i:])
			if !complete {
				return b.String(), true
			}
			b.WriteRune(r)
			i += n
			continue
		default:
			decoded, known := map[byte]string{'"': `"`, '\\': `\`, '/': "/", 'b': "\b", 'f': "\f", 'n': "\n", 'r': "\r", 't': "\t"}[e]
			if !known {
				return b.String(), true
			}
			b.WriteString(decoded)
		}
		i += 2
	}
	return b.String(), true
}

// unicodeEscape decodes a \uXXXX escape at the start of s (with its low
// surrogate when it is a high one); complete is false while it is still
// arriving.
func unicodeEscape(s string) (rune, int, bool) {
	if len(s) < 6 {
		return 0, 0, false
	}
	v, err := strconv.ParseUint(s[2:6], 16, 16)
	if err != nil {
		return utf8.RuneError, 6, true
	}
	r := rune(v)
	if !utf16.IsSurrogate(r) {
		return r, 6, true
	}
	if len(s) < 12 {
		return 0, 0, false
	}
	lo, err := strconv.ParseUint(s[8:12], 16, 16)
	if s[6:8] != `\u` || err != nil {
		return utf8.RuneError, 6, true
	}
	return utf16.DecodeRune(r, rune(lo)), 12, true
}

// searchArguments are a tool_search call's arguments as a JSON value: the
// object generated, {} for none, the text as a string when it is not JSON.
func searchArguments(args string) json.RawMessage {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(compactJSON(json.RawMessage(args)))
	}
	b, _ := json.Marshal(args)
	return b
}
