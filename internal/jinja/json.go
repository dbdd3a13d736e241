package jinja

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FromJSON decodes JSON into template values, objects as *Map in the
// document's key order, integers as int64 and other numbers as float64
// (as Python's json.loads reads them).
func FromJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

const maxJSONDepth = 512

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("JSON nested deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := NewMap()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				m.Set(k, v)
			}
			_, err := dec.Token()
			return m, err
		case '[':
			l := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := dec.Token()
			return l, err
		}
	case json.Number:
		s := string(t)
		if !strings.ContainsAny(s, ".eE") {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return n, nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		return f, nil
	case string, bool, nil:
		return t, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// ToJSON is the template's tojson: Python's json.dumps with
// ensure_ascii=False, the given indent (nil for none) and sort_keys.
func ToJSON(v any, indent any, sortKeys bool) (string, error) {
	e := jsonEnc{item: ", ", key: ": ", sortKeys: sortKeys}
	switch x := indent.(type) {
	case nil:
	case string:
		e.indent, e.pretty, e.item = x, true, ","
	default:
		n, ok := integer(x)
		if !ok {
			return "", fmt.Errorf("tojson: indent must be an integer or a string")
		}
		if n > 1024 {
			return "", fmt.Errorf("tojson: indent %d too large", n)
		}
		e.indent, e.pretty, e.item = strings.Repeat(" ", int(max(n, 0))), true, ","
	}
	if err := e.value(v, 0); err != nil {
		return "", err
	}
	return e.b.String(), nil
}

type jsonEnc struct {
	b           strings.Builder
	item, key   string
	indent      string
	pretty      bool
	sortKeys    bool
	limit       int
	ensureASCII bool
}

func (e *jsonEnc) newline(depth int) {
	if e.pretty {
		e.b.WriteByte('\n')
		for range depth {
			e.b.WriteString(e.indent)
		}
	}
}

func (e *jsonEnc) value(v any, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("tojson: nested deeper than %d", maxJSONDepth)
	}
	if e.limit > 0 && e.b.Len() > e.limit {
		return fmt.Errorf("%w: tojson output larger than %d bytes", ErrBudget, e.limit)
	}
	switch x := v.(type) {
	case nil:
		e.b.WriteString("null")
	case bool:
		if x {
			e.b.WriteString("true")
		} else {
			e.b.WriteString("false")
		}
	case int64:
		e.b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			e.b.WriteString("NaN")
		case math.IsInf(x, 1):
			e.b.WriteString("Infinity")
		case math.IsInf(x, -1):
			e.b.WriteString("-Infinity")
		default:
			e.b.WriteString(pyFloat(x))
		}
	case string:
		e.str(x)
	case []any, Tuple:
		items, _ := asSeq(x)
		if len(items) == 0 {
			e.b.WriteString("[]")
			return nil
		}
		e.b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				e.b.WriteString(e.item)
			}
			e.newline(depth + 1)
			if err := e.value(it, depth+1); err != nil {
				return err
			}
		}
		e.newline(depth)
		e.b.WriteByte(']')
	case *Map:
		if x.Len() == 0 {
			e.b.WriteString("{}")
			return nil
		}
		keys := x.keys
		if e.sortKeys {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		e.b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				e.b.WriteString(e.item)
			}
			e.newline(depth + 1)
			e.str(strings.TrimPrefix(k, "\x00"))
			e.b.WriteString(e.key)
			if err := e.value(x.vals[k], depth+1); err != nil {
				return err
			}
		}
		e.newline(depth)
		e.b.WriteByte('}')
	default:
		return fmt.Errorf("Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

// str writes a JSON string as Python's json.dumps does with
// ensure_ascii=False: only ", \ and control characters are escaped.
func (e *jsonEnc) str(s string) {
	const hex = "0123456789abcdef"
	e.b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x80 {
			r, n := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && n == 1:
				e.b.WriteString(`\ufffd`)
			case e.ensureASCII && r > 0xffff:
				r -= 0x10000
				fmt.Fprintf(&e.b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			case e.ensureASCII:
				fmt.Fprintf(&e.b, `\u%04x`, r)
			default:
				e.b.WriteString(s[i : i+n])
			}
			i += n
			continue
		}
		switch c {
		case '"':
			e.b.WriteString(`\"`)
		case '\\':
			e.b.WriteString(`\\`)
		case '\n':
			e.b.WriteString(`\n`)
		case '\r':
			e.b.WriteString(`\r`)
		case '\t':
			e.b.WriteString(`\t`)
		case '\b':
			e.b.WriteString(`\b`)
		case '\f':
			e.b.WriteString(`\f`)
		default:
			if c < 0x20 {
				e.b.WriteString(`\u00`)
				e.b.WriteByte(hex[c>>4])
				e.b.WriteByte(hex[c&15])
			} else {
				e.b.WriteByte(c)
			}
		}
		i++
	}
	e.b.WriteByte('"')
}

func fTojson(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	indent := arg(args, kw, 0, "indent")
	e := jsonEnc{item: ", ", key: ": ", sortKeys: truthy(arg(nil, kw, -1, "sort_keys")), limit: ev.budget.Output}
	if indent != nil {
		s, err := ToJSON(nil, indent, false) // validates indent
		_ = s
		if err != nil {
			return nil, err
		}
		if x, ok := indent.(string); ok {
			e.indent = x
		} else {
			n, _ := integer(indent)
			e.indent = strings.Repeat(" ", int(max(n, 0)))
		}
		e.pretty, e.item = true, ","
	}
	if sep := arg(nil, kw, -1, "separators"); sep != nil {
		parts, ok := asSeq(sep)
		if !ok || len(parts) != 2 {
			return nil, fmt.Errorf("tojson: separators must be a pair of strings")
		}
		e.item, e.key = str(parts[0]), str(parts[1])
	}
	e.ensureASCII = truthy(arg(nil, kw, -1, "ensure_ascii"))
	if err := e.value(v, 0); err != nil {
		return nil, err
	}
	return e.b.String(), ev.produce(e.b.Len())
}
