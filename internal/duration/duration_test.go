package duration

import (
	"errors"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	ok := map[string]time.Duration{
		"5m":     5 * time.Minute,
		"300":    300 * time.Second,
		"-1":     -time.Second,
		"0":      0,
		"-0":     0,
		"+90":    90 * time.Second,
		"1.5":    1500 * time.Millisecond,
		".5":     500 * time.Millisecond,
		"2.":     2 * time.Second,
		"1h30m":  90 * time.Minute,
		"-1m":    -time.Minute,
		"250ms":  250 * time.Millisecond,
		" 10s\n": 10 * time.Second,
		"1µs":    time.Microsecond,
	}
	for in, want := range ok {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	syntax := []string{
		"10 minutes", // not 10 seconds
		"", "  ", "1e3", "1E3", "inf", "-Inf", "NaN", "0x10", "1_000", "5 m", "5M",
		"m", "-", ".", "-.s", "5m-3s", "1d", "1,5", "soon", "٣", "5m\x00",
	}
	for _, in := range syntax {
		if d, err := Parse(in); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %s, %v; want ErrSyntax", in, d, err)
		}
	}
	for _, in := range []string{"99999999999", "9223372037", "2562048h", "-2562048h", "106751.99116730065d"} {
		d, err := Parse(in)
		if in == "106751.99116730065d" {
			if !errors.Is(err, ErrSyntax) {
				t.Errorf("Parse(%q) = %s, %v; want ErrSyntax", in, d, err)
			}
			continue
		}
		if !errors.Is(err, ErrRange) {
			t.Errorf("Parse(%q) = %s, %v; want ErrRange", in, d, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"5m", "300", "-1", "0", "1e3", "", "10 minutes", "1.5h", "9223372036.854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrRange) {
				t.Fatalf("Parse(%q): untyped error %v", s, err)
			}
			return
		}
		// What Parse accepts, time.ParseDuration reads the same way once
		// a bare number gets its unit.
		back, err := Parse(d.String())
		if err != nil || back != d {
			t.Fatalf("Parse(%q) = %s, whose String() parses as %s, %v", s, d, back, err)
		}
	})
}
