// Package duration owns the one way modeld reads a duration written by a
// person or a client: the configuration (--keep-alive, --load-wait, ...) and
// the keep_alive field of requests use the same parser, so a value means the
// same thing wherever it is written. It decides only the syntax; what a
// negative or zero duration means is the caller's.
package duration

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Syntax says what Parse accepts, for error messages and help texts.
const Syntax = `a duration such as "90s", "5m" or "1h30m", or a number of seconds such as "300" or "-1"`

// ErrSyntax is the error of a value that is neither form; Parse wraps it.
var ErrSyntax = errors.New("want " + Syntax)

// Parse reads a Go duration ("90s", "5m", "1h30m", "-1m", "0") or a plain
// decimal number of seconds ("300", "-1", "1.5"), around which spaces are
// ignored. Nothing else is a duration: not "10 minutes" (which is not 10
// seconds), not "", not exponents ("1e3"), hex, "inf" or "NaN". A value
// outside time.Duration's range is an error, never a wrapped-around one.
func Parse(s string) (time.Duration, error) {
	v := strings.TrimSpace(s)
	if v == "" {
		return 0, fmt.Errorf("empty: %w", ErrSyntax)
	}
	if seconds(v) {
		v += "s"
	}
	if !goDuration.MatchString(v) {
		return 0, ErrSyntax
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, ErrRange
	}
	return d, nil
}

// ErrRange is the error of a well-formed duration beyond time.Duration's
// range (about 292 years either way).
var ErrRange = errors.New("out of range (at most 2562047h)")

// goDuration is the syntax time.ParseDuration reads, so that its only
// remaining failure is a value out of range.
var goDuration = regexp.MustCompile(`^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))+)$`)

// seconds reports whether v is a signed decimal number without a unit:
// digits, at most one '.', with a digit on at least one side of it.
func seconds(v string) bool {
	if v[0] == '-' || v[0] == '+' {
		v = v[1:]
	}
	digits, dot := 0, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot:
			dot = true
		default:
			return false
		}
	}
	return digits > 0
}
