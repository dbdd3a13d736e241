package engine

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// feed pushes pieces and returns the released text, whether a stop matched,
// and the concatenation of everything released (with the final flush when
// no stop matched).
func feed(stops []string, pieces ...string) (string, bool) {
	a := newTextAssembler(stops)
	var sb strings.Builder
	for _, p := range pieces {
		out, stopped := a.push(p)
		sb.WriteString(out)
		if stopped {
			return sb.String(), true
		}
	}
	sb.WriteString(a.flush())
	return sb.String(), false
}

func TestStopSplitAcrossPieces(t *testing.T) {
	cases := []struct {
		name    string
		stops   []string
		pieces  []string
		want    string
		stopped bool
	}{
		{"whole piece", []string{"STOP"}, []string{"ab", "STOP", "cd"}, "ab", true},
		{"split in three", []string{"STOP"}, []string{"abS", "T", "OPcd"}, "ab", true},
		{"inside one piece", []string{"xy"}, []string{"12xy34"}, "12", true},
		{"false start released", []string{"STOP"}, []string{"ST", "ART"}, "START", false},
		{"false start then stop", []string{"STOP"}, []string{"S", "SSTO", "P!"}, "SS", true},
		{"earliest of two", []string{"bc", "ab"}, []string{"xa", "bc"}, "x", true},
		{"no stops", nil, []string{"a", "b"}, "ab", false},
		{"empty stop ignored", []string{""}, []string{"a", "b"}, "ab", false},
		{"multibyte stop", []string{"日本"}, []string{"x日", "本y"}, "x", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, stopped := feed(c.stops, c.pieces...)
			if got != c.want || stopped != c.stopped {
				t.Errorf("got %q stopped=%v, want %q stopped=%v", got, stopped, c.want, c.stopped)
			}
		})
	}
}

// No prefix of the released text may ever contain a stop string, and
// nothing is released while it could still become one.
func TestStopTextNeverReleased(t *testing.T) {
	a := newTextAssembler([]string{"<|end|>"})
	var released strings.Builder
	for _, p := range []string{"hi <", "|", "en", "d", "|", ">"} {
		out, stopped := a.push(p)
		released.WriteString(out)
		if strings.Contains(released.String(), "<") {
			t.Fatalf("released %q, which holds the start of the stop string", released.String())
		}
		if stopped {
			if released.String() != "hi " {
				t.Errorf("released %q, want %q", released.String(), "hi ")
			}
			return
		}
	}
	t.Fatal("stop string never matched")
}

func TestUTF8HeldUntilComplete(t *testing.T) {
	euro := "€" // E2 82 AC
	a := newTextAssembler(nil)
	if out, _ := a.push(euro[:1]); out != "" {
		t.Errorf("released %q after one byte of three", out)
	}
	if out, _ := a.push(euro[1:2]); out != "" {
		t.Errorf("released %q after two bytes of three", out)
	}
	if out, _ := a.push(euro[2:] + "a"); out != "€a" {
		t.Errorf("released %q, want €a", out)
	}
	// Invalid bytes are released at once, replaced.
	if out, _ := a.push("\xff"); out != "\uFFFD" {
		t.Errorf("released %q for an invalid byte", out)
	}
	// An incomplete sequence at the end is replaced on flush.
	a.push("\xe2\x82")
	if out := a.flush(); !utf8.ValidString(out) || out == "" {
		t.Errorf("flush gave %q", out)
	}
}
