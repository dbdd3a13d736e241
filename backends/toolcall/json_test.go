package toolcall

import (
	"encoding/json"
	"strings"
	"testing"
)

var jsonSeeds = []string{
	`{}`, `[]`, `{"a": [1, -2.5e+10, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9"]}`,
	`"日本語 😀"`, `0`, `-0.0e0`, `01`, `1.`, `.5`, `{"a" 1}`, `{"a": }`, `[1,]`,
	`{"a": 1,}`, `"\x"`, `"\u12g4"`, `tru`, `nul`, `[[[[[[[[[[]]]]]]]]]]`, "\"a\tb\"",
	`{"k": {"k": {"k": [{"k": "}"}]}}}`,
}

func TestScanValueMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonSeeds {
		checkScanValue(t, s)
	}
}

// checkScanValue checks scanValue against encoding/json on a complete
// value, and that no prefix of a valid value is called malformed.
func checkScanValue(t *testing.T, s string) {
	t.Helper()
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	in := s + " " // ends a trailing number
	end, st := scanValue(in, 0)
	got := st == stOK && skipWS(in, end) == len(in)
	want := json.Valid([]byte(s))
	if got != want {
		t.Fatalf("scanValue(%q) = %d, %v; encoding/json valid = %v", s, end, st, want)
	}
	if !want {
		return
	}
	for i := range len(s) {
		if _, st := scanValue(s[:i], 0); st == stBad {
			t.Fatalf("prefix %q of valid %q is malformed", s[:i], s)
		}
	}
}

func FuzzScanValue(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkScanValue(t, s)
	})
}
