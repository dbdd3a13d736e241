package jsonstr

import (
	"bytes"
	"encoding/json"
	"testing"
)

var seeds = []string{"", "plain", " tokens", "héllo wörld 日本", "<tool_call>&</tool_call>", "a\"b\\c",
	"line\nnext\ttab\r", "\x00\x01\x1f\x7f", "\b\f", "\u2028\u2029", "bad \xff\xfe utf8 \xe6\x97", "\xe6\x97\xa5",
	"emoji 🦙", "/slash/", "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80 above U+10FFFF"}

// want is encoding/json's string, HTML escaped or not.
func want(t testing.TB, s string, escapeHTML bool) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// TestAppendEqualsEncodingJSON: every escape, both HTML modes.
func TestAppendEqualsEncodingJSON(t *testing.T) {
	all := append([]string(nil), seeds...)
	var every []byte
	for c := range 256 {
		every = append(every, byte(c))
	}
	all = append(all, string(every))
	for _, s := range all {
		for _, html := range []bool{false, true} {
			if got, w := Append([]byte("x"), s, html), want(t, s, html); !bytes.Equal(got[1:], w) || got[0] != 'x' {
				t.Errorf("%q (html %v): got %s, want %s", s, html, got[1:], w)
			}
		}
	}
}

// FuzzAppend holds Append to encoding/json on any string.
func FuzzAppend(f *testing.F) {
	for _, s := range seeds {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, html bool) {
		if got, w := Append(nil, s, html), want(t, s, html); !bytes.Equal(got, w) {
			t.Errorf("%q (html %v): got %s, want %s", s, html, got, w)
		}
	})
}
