package jinja

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Values a template sees are nil (None), bool, int64, float64, string,
// []any (a list; a tuple is a Tuple), *Map, Undefined, and the engine's
// own callables. Render converts int, float32 and []string for the caller.

// Undefined is a name or key that does not exist. It prints as "", is
// false, iterates as empty, and any attribute of it is an error.
type Undefined struct{ Name string }

// Tuple is a Python tuple (from a tuple literal or dict items).
type Tuple []any

// Generator is the lazy sequence that Jinja's map, select, reject, unique
// and items filters return: it iterates, but has no length, is always
// true and is not JSON.
type Generator []any

// Markup is a string marked safe (the safe and escape filters): adding a
// plain string to it escapes that string, as Python's markupsafe does.
type Markup string

// Map is a dict that keeps insertion order, as Python's does.
type Map struct {
	keys []string
	vals map[string]any
	ns   bool // a namespace(): attribute assignment allowed
}

// mapKey is the key under which a dict stores v: a string as it is, an
// integer in a form no string from JSON takes (Python dicts allow both).
func mapKey(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int64:
		return "\x00" + strconv.FormatInt(x, 10), true
	case bool:
		if x {
			return "\x001", true
		}
		return "\x000", true
	}
	return "", false
}

// keyValue is the value of a stored key.
func keyValue(k string) any {
	if strings.HasPrefix(k, "\x00") {
		if n, err := strconv.ParseInt(k[1:], 10, 64); err == nil {
			return n
		}
	}
	return k
}

// NewMap returns an empty Map.
func NewMap() *Map { return &Map{vals: map[string]any{}} }

// Set sets key to v, appending key when it is new.
func (m *Map) Set(key string, v any) {
	if _, ok := m.vals[key]; !ok {
		m.keys = append(m.keys, key)
	}
	m.vals[key] = v
}

// Get returns the value of key.
func (m *Map) Get(key string) (any, bool) {
	v, ok := m.vals[key]
	return v, ok
}

// Keys are the keys in insertion order.
func (m *Map) Keys() []string { return m.keys }

// Len is the number of keys.
func (m *Map) Len() int { return len(m.keys) }

// Delete removes key.
func (m *Map) Delete(key string) {
	if _, ok := m.vals[key]; !ok {
		return
	}
	delete(m.vals, key)
	for i, k := range m.keys {
		if k == key {
			m.keys = append(m.keys[:i:i], m.keys[i+1:]...)
			break
		}
	}
}

// rangeVal is a lazy range(), so range(10**9) costs nothing until iterated.
type rangeVal struct{ start, stop, step int64 }

func (r rangeVal) len() int64 {
	if r.step > 0 && r.start < r.stop {
		return (r.stop - r.start + r.step - 1) / r.step
	}
	if r.step < 0 && r.start > r.stop {
		return (r.start - r.stop - r.step - 1) / -r.step
	}
	return 0
}

// normalize turns the Go types a caller may pass into template values.
func normalize(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case float32:
		return float64(x)
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	case map[string]any:
		m := NewMap()
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m.Set(k, normalize(x[k]))
		}
		return m
	case []any:
		for i := range x {
			x[i] = normalize(x[i])
		}
		return x
	}
	return v
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil, Undefined:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case Tuple:
		return len(x) > 0
	case *Map:
		return x.Len() > 0
	case rangeVal:
		return x.len() > 0
	case Markup:
		return x != ""
	}
	return true
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case Undefined:
		return "Undefined"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case Tuple:
		return "tuple"
	case *Map:
		return "dict"
	case rangeVal:
		return "range"
	case Generator:
		return "generator"
	case Markup:
		return "Markup"
	}
	return "function"
}

// str is Python's str() of a value.
func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case Markup:
		return string(x)
	case Undefined:
		return ""
	}
	var b strings.Builder
	repr(&b, v, true)
	return b.String()
}

// repr writes Python's repr() (top: str() for the outer value).
func repr(b *strings.Builder, v any, top bool) {
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case Undefined:
		if !top {
			b.WriteString("Undefined")
		}
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(pyFloat(x))
	case string:
		if top {
			b.WriteString(x)
		} else {
			pyQuote(b, x)
		}
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			repr(b, e, false)
		}
		b.WriteByte(']')
	case Tuple:
		b.WriteByte('(')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			repr(b, e, false)
		}
		if len(x) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
	case *Map:
		if x.ns {
			b.WriteString("<Namespace ")
		}
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			repr(b, keyValue(k), false)
			b.WriteString(": ")
			repr(b, x.vals[k], false)
		}
		b.WriteByte('}')
		if x.ns {
			b.WriteByte('>')
		}
	case Markup:
		if top {
			b.WriteString(string(x))
		} else {
			b.WriteString("Markup(")
			pyQuote(b, string(x))
			b.WriteString(")")
		}
	case Generator:
		b.WriteString("<generator object>")
	case rangeVal:
		if x.step == 1 {
			fmt.Fprintf(b, "range(%d, %d)", x.start, x.stop)
		} else {
			fmt.Fprintf(b, "range(%d, %d, %d)", x.start, x.stop, x.step)
		}
	default:
		fmt.Fprintf(b, "<%s>", typeName(v))
	}
}

// pyFloat is Python's repr of a float.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	exp := math.Floor(math.Log10(math.Abs(f)))
	s := strconv.FormatFloat(f, 'e', -1, 64)
	if exp < -4 || exp >= 16 {
		// Python writes 1e+16, 1.5e-05: at least two exponent digits.
		mant, e, _ := strings.Cut(s, "e")
		sign := e[0]
		digits := strings.TrimLeft(e[1:], "0")
		if len(digits) < 2 {
			digits = strings.Repeat("0", 2-len(digits)) + digits
		}
		return mant + "e" + string(sign) + digits
	}
	s = strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// pyQuote writes a Python string literal as repr() does.
func pyQuote(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, "\"") {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteByte(q)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
}

// demark turns a Markup into its plain string.
func demark(v any) any {
	if m, ok := v.(Markup); ok {
		return string(m)
	}
	return v
}

// equal is Python's ==.
func equal(a, b any) bool {
	a, b = demark(a), demark(b)
	switch x := a.(type) {
	case nil:
		return b == nil
	case Undefined:
		_, ok := b.(Undefined)
		return ok
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool, int64, float64:
		fa, ok1 := number(a)
		fb, ok2 := number(b)
		return ok1 && ok2 && fa == fb
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case Tuple:
		y, ok := b.(Tuple)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case *Map:
		y, ok := b.(*Map)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, k := range x.keys {
			w, ok := y.vals[k]
			if !ok || !equal(x.vals[k], w) {
				return false
			}
		}
		return true
	}
	return a == b
}

// number is a bool, int or float as a float64.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// integer is a bool or int as an int64.
func integer(v any) (int64, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case int64:
		return x, true
	}
	return 0, false
}

// compare is Python's ordering of two values: -1, 0, 1.
func compare(a, b any) (int, error) {
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	}
	if ia, ok := integer(a); ok {
		if ib, ok := integer(b); ok {
			switch {
			case ia < ib:
				return -1, nil
			case ia > ib:
				return 1, nil
			}
			return 0, nil
		}
	}
	fa, ok1 := number(a)
	fb, ok2 := number(b)
	if ok1 && ok2 {
		switch {
		case fa < fb:
			return -1, nil
		case fa > fb:
			return 1, nil
		}
		return 0, nil
	}
	la, ok1 := asSeq(a)
	lb, ok2 := asSeq(b)
	if ok1 && ok2 && typeName(a) == typeName(b) {
		for i := 0; i < len(la) && i < len(lb); i++ {
			if equal(la[i], lb[i]) {
				continue
			}
			return compare(la[i], lb[i])
		}
		return compare(int64(len(la)), int64(len(lb)))
	}
	return 0, fmt.Errorf("'<' not supported between instances of '%s' and '%s'", typeName(a), typeName(b))
}

func asSeq(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case Tuple:
		return x, true
	}
	return nil, false
}
