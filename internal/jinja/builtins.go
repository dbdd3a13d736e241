package jinja

import (
	"fmt"
	"strings"
	"time"
)

// globals are the functions every template sees.
var globals = map[string]any{
	"range": builtin(func(ev *evaluator, args []any, _ *Map) (any, error) {
		var n [3]int64
		n[2] = 1
		for i, a := range args {
			x, ok := integer(a)
			if !ok || i > 2 {
				return nil, fmt.Errorf("range() takes up to 3 integer arguments")
			}
			n[i] = x
		}
		switch len(args) {
		case 0:
			return nil, fmt.Errorf("range expected at least 1 argument")
		case 1:
			return rangeVal{0, n[0], 1}, nil
		}
		if n[2] == 0 {
			return nil, fmt.Errorf("range() arg 3 must not be zero")
		}
		return rangeVal{n[0], n[1], n[2]}, nil
	}),
	"namespace": builtin(func(ev *evaluator, args []any, kw *Map) (any, error) {
		m := NewMap()
		m.ns = true
		for _, a := range args {
			if d, ok := a.(*Map); ok {
				for _, k := range d.keys {
					m.Set(k, d.vals[k])
				}
			}
		}
		if kw != nil {
			for _, k := range kw.keys {
				m.Set(k, kw.vals[k])
			}
		}
		return m, nil
	}),
	"dict": builtin(func(ev *evaluator, args []any, kw *Map) (any, error) {
		m := NewMap()
		if kw != nil {
			for _, k := range kw.keys {
				m.Set(k, kw.vals[k])
			}
		}
		return m, nil
	}),
	"raise_exception": builtin(func(ev *evaluator, args []any, _ *Map) (any, error) {
		msg := ""
		if len(args) > 0 {
			msg = str(args[0])
		}
		return nil, fmt.Errorf("%w: %s", ErrRaised, msg)
	}),
	"strftime_now": builtin(func(ev *evaluator, args []any, _ *Map) (any, error) {
		if len(args) != 1 {
			return nil, fmt.Errorf("strftime_now takes one argument")
		}
		f, ok := args[0].(string)
		if !ok {
			return nil, fmt.Errorf("strftime_now: the format must be a string")
		}
		return strftime(ev.now(), f), nil
	}),
}

// strftime is Python's time formatting for the directives templates use.
func strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case '-':
			if i+1 < len(f) {
				i++
				switch f[i] {
				case 'd':
					fmt.Fprintf(&b, "%d", t.Day())
				case 'm':
					fmt.Fprintf(&b, "%d", int(t.Month()))
				case 'H':
					fmt.Fprintf(&b, "%d", t.Hour())
				default:
					b.WriteString("%-" + string(f[i]))
				}
			}
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			fmt.Fprintf(&b, "%02d", h)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}
