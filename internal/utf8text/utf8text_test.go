package utf8text

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modeld/modeld/internal/jsonstr"
)

func TestIncompleteTail(t *testing.T) {
	cases := map[string]int{
		"": 0, "a": 0, "\xe2": 1, "\xe2\x82": 2, "\xe2\x82\xac": 0, "a\xf0\x9f\x99": 3,
		"\x82": 0, "\xff": 0, "é": 0,
		"\xe0\x80": 0, // overlong: no continuation makes it valid
		"\xed\xa0": 0, // an encoded surrogate
		"\xf4\x90": 0, // over U+10FFFF
		"\xfc\x89": 0, // a 6-byte form of old
		"\xf0":     1, "\xed\x9f": 2,
	}
	for in, want := range cases {
		if got := IncompleteTail([]byte(in)); got != want {
			t.Errorf("IncompleteTail(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestValidOneReplacementPerByte: every byte that does not begin a valid
// encoding is one U+FFFD, as encoding/json and jsonstr write it, so text
// that crosses the runner's wire is not changed again.
func TestValidOneReplacementPerByte(t *testing.T) {
	cases := map[string]string{
		"abc":              "abc",
		"\xfc\x89\x88\x98": "\uFFFD\uFFFD\uFFFD\uFFFD",
		"\xc0\xaf":         "\uFFFD\uFFFD",             // overlong '/'
		"\xed\xa0\x80":     "\uFFFD\uFFFD\uFFFD",       // U+D800 encoded
		"\xf4\x90\x80\x80": "\uFFFD\uFFFD\uFFFD\uFFFD", // U+110000
		"a\xe2\x82b":       "a\uFFFD\uFFFDb",
		"€\x80🙂":           "€\uFFFD🙂",
		"\xef\xbf\xbd":     "\uFFFD", // U+FFFD itself stays one
	}
	for in, want := range cases {
		got := Valid([]byte(in))
		if got != want || ValidString(in) != want {
			t.Errorf("Valid(%q) = %q, want %q", in, got, want)
		}
		var viaJSON string
		b, _ := json.Marshal(in)
		if err := json.Unmarshal(b, &viaJSON); err != nil || viaJSON != want {
			t.Errorf("encoding/json makes %q of %q, Valid %q", viaJSON, in, want)
		}
		if err := json.Unmarshal(jsonstr.Append(nil, in, false), &viaJSON); err != nil || viaJSON != want {
			t.Errorf("jsonstr makes %q of %q, Valid %q", viaJSON, in, want)
		}
	}
}

// TestAssemblerSplits: a character split over pieces is held until it is
// complete; the text released equals Valid of the whole, however it is cut.
func TestAssemblerSplits(t *testing.T) {
	whole := "a€\xfc\x89\x88\x98🙂\xe2\x82x\xf0\x9f"
	for cut := range len(whole) + 1 {
		for cut2 := cut; cut2 <= len(whole); cut2++ {
			var a Assembler
			got := a.Push(whole[:cut]) + a.Push(whole[cut:cut2]) + a.Push(whole[cut2:]) + a.Flush()
			if want := Valid([]byte(whole)); got != want || !utf8.ValidString(got) {
				t.Fatalf("cuts %d, %d: %q, want %q", cut, cut2, got, want)
			}
		}
	}
	var a Assembler
	if out := a.Push("\xe2\x82"); out != "" {
		t.Errorf("an incomplete € released %q", out)
	}
	if out := a.Push("\xac!"); out != "€!" {
		t.Errorf("the completed € released %q", out)
	}
	if out := a.Push(strings.Repeat("\x80", 3)); out != "\uFFFD\uFFFD\uFFFD" {
		t.Errorf("stray continuation bytes released %q", out)
	}
}
