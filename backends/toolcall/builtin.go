package toolcall

import (
	"encoding/json"
	"strings"
)

// builtinCall reads a Llama 3.1 built-in tool call after <|python_tag|>:
// name.call(key="value", n=3, flag=True). Its arguments become one JSON
// object, released when the closing parenthesis arrives.
func (sc *scanner) builtinCall(i int) (int, status) {
	s := sc.s
	name, j, st := until(s, i, ".call(", nameBad+"()=,;")
	if st != stOK {
		return j, st
	}
	sc.named(name)
	var b strings.Builder
	b.WriteByte('{')
	j = skipWS(s, j)
	for first := true; ; first = false {
		if j >= len(s) {
			return j, stMore
		}
		if s[j] == ')' {
			b.WriteByte('}')
			c := sc.cur()
			c.args, c.done = b.String(), true
			return j + 1, stOK
		}
		if !first {
			if s[j] != ',' {
				return j, stBad
			}
			if j = skipWS(s, j+1); j >= len(s) {
				return j, stMore
			}
		}
		k := j
		for k < len(s) && isIdent(s[k]) {
			k++
		}
		if k >= len(s) {
			return k, stMore
		}
		if k == j {
			return j, stBad
		}
		key := s[j:k]
		if k = skipWS(s, k); k >= len(s) {
			return k, stMore
		}
		if s[k] != '=' {
			return k, stBad
		}
		v, end, st := pyValue(s, skipWS(s, k+1))
		if st != stOK {
			return end, st
		}
		if !first {
			b.WriteString(", ")
		}
		kj, _ := json.Marshal(key)
		b.Write(kj)
		b.WriteString(": ")
		b.Write(v)
		j = skipWS(s, end)
	}
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// pyValue reads a Python literal (a quoted string, a number, True, False
// or None) and returns it as JSON.
func pyValue(s string, i int) ([]byte, int, status) {
	if i >= len(s) {
		return nil, i, stMore
	}
	switch c := s[i]; {
	case c == '"' || c == '\'':
		var v strings.Builder
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case c:
				out, err := json.Marshal(v.String())
				if err != nil {
					return nil, j, stBad
				}
				return out, j + 1, stOK
			case '\\':
				if j+1 >= len(s) {
					return nil, j, stMore
				}
				j++
				switch e := s[j]; e {
				case 'n':
					v.WriteByte('\n')
				case 't':
					v.WriteByte('\t')
				case 'r':
					v.WriteByte('\r')
				case '\\', '"', '\'':
					v.WriteByte(e)
				default:
					v.WriteByte('\\')
					v.WriteByte(e)
				}
			default:
				v.WriteByte(s[j])
			}
		}
		return nil, len(s), stMore
	case c == '-' || isDigit(c):
		j := i
		for j < len(s) && strings.IndexByte("0123456789+-.eE", s[j]) >= 0 {
			j++
		}
		if j >= len(s) {
			return nil, j, stMore
		}
		if !json.Valid([]byte(s[i:j])) {
			return nil, i, stBad
		}
		return []byte(s[i:j]), j, stOK
	}
	for _, w := range [...]struct{ py, js string }{{"True", "true"}, {"False", "false"}, {"None", "null"}} {
		if s[i] != w.py[0] {
			continue
		}
		j, st := lit(s, i, w.py)
		if st == stNo {
			return nil, i, stBad
		}
		return []byte(w.js), j, st
	}
	return nil, i, stBad
}
