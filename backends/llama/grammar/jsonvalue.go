package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// object is a JSON object that keeps its keys' order: a schema's property
// order is the order the grammar emits them in.
type object struct {
	keys []string
	m    map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.m[k]
	return v, ok
}

func (o *object) set(k string, v any) {
	if _, ok := o.m[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.m[k] = v
}

func newObject() *object { return &object{m: map[string]any{}} }

// parseJSON decodes data into *object, []any, string, json.Number, bool and
// nil, bounding nesting by maxDepth.
func parseJSON(data []byte, maxDepth int) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, 0, maxDepth)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &InvalidError{Reason: "trailing data after the schema"}
	}
	return v, nil
}

func parseValue(dec *json.Decoder, depth, maxDepth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, &InvalidError{Reason: "not JSON: " + err.Error()}
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return nil, &LimitError{Limit: "MaxDepth", Max: maxDepth}
		}
		if t == '[' {
			arr := []any{}
			for dec.More() {
				v, err := parseValue(dec, depth+1, maxDepth)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token()
			if err != nil {
				return nil, &InvalidError{Reason: "not JSON: " + err.Error()}
			}
			return arr, nil
		}
		obj := newObject()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, &InvalidError{Reason: "not JSON: " + err.Error()}
			}
			k := kt.(string)
			if _, dup := obj.m[k]; dup {
				return nil, &InvalidError{Reason: fmt.Sprintf("duplicate key %q", k)}
			}
			v, err := parseValue(dec, depth+1, maxDepth)
			if err != nil {
				return nil, err
			}
			obj.set(k, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, &InvalidError{Reason: "not JSON: " + err.Error()}
		}
		return obj, nil
	default:
		return t, nil
	}
}

// compact writes v as compact JSON (object keys in their order, no HTML
// escaping), the text the grammar emits for a const or enum value.
func compact(v any) string {
	var b strings.Builder
	writeCompact(&b, v)
	return b.String()
}

func writeCompact(b *strings.Builder, v any) {
	switch t := v.(type) {
	case *object:
		b.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			writeCompact(b, t.m[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCompact(b, e)
		}
		b.WriteByte(']')
	case string:
		writeString(b, t)
	case json.Number:
		b.WriteString(t.String())
	case bool:
		if t {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case nil:
		b.WriteString("null")
	}
}

func writeString(b *strings.Builder, s string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b.Write(bytes.TrimRight(buf.Bytes(), "\n"))
}

// equalJSON reports whether two decoded values are the same JSON (object key
// order ignored).
func equalJSON(a, b any) bool {
	return canonical(a) == canonical(b)
}

func canonical(v any) string {
	if o, ok := v.(*object); ok {
		keys := append([]string(nil), o.keys...)
		sort.Strings(keys)
		var b strings.Builder
		b.WriteByte('{')
		for _, k := range keys {
			writeString(&b, k)
			b.WriteByte(':')
			b.WriteString(canonical(o.m[k]))
			b.WriteByte(',')
		}
		b.WriteByte('}')
		return b.String()
	}
	if a, ok := v.([]any); ok {
		parts := make([]string, len(a))
		for i, e := range a {
			parts[i] = canonical(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return compact(v)
}
