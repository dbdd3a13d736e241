package toolcall

import (
	"encoding/json"
	"slices"
	"strings"
)

// keys names the members of a JSON call object.
type keys struct{ name, args []string }

var (
	keysOpenAI  = keys{name: []string{"name"}, args: []string{"arguments"}}
	keysLlama   = keys{name: []string{"name"}, args: []string{"parameters", "arguments"}}
	keysCommand = keys{name: []string{"tool_name"}, args: []string{"parameters"}}
)

// callObject reads one call written as a JSON object at s[i]: its name
// and arguments members, other members (an "id", a "type") skipped. The
// arguments must be an object, or a string holding one; missing ones are
// {}.
func (sc *scanner) callObject(i int, k keys) (int, status) {
	s := sc.s
	if i >= len(s) {
		return i, stMore
	}
	if s[i] != '{' {
		return i, stBad
	}
	sc.calls = append(sc.calls, pcall{})
	c := sc.cur()
	i = skipWS(s, i+1)
	hasArgs := false
	for first := true; ; first = false {
		if i >= len(s) {
			return i, stMore
		}
		if s[i] == '}' {
			if !c.named {
				return i, stBad
			}
			if !hasArgs {
				c.args = "{}"
			}
			c.done = true
			return i + 1, stOK
		}
		if !first {
			if s[i] != ',' {
				return i, stBad
			}
			i = skipWS(s, i+1)
		}
		ks := i
		j, st := scanKey(s, i)
		if st != stOK {
			return j, st
		}
		var key string
		end, _ := scanString(s, ks)
		if json.Unmarshal([]byte(s[ks:end]), &key) != nil {
			return ks, stBad
		}
		i = j
		if i >= len(s) {
			return i, stMore
		}
		switch {
		case slices.Contains(k.name, key):
			if c.named {
				return ks, stBad
			}
			j, st := scanString(s, i)
			if st != stOK {
				return j, st
			}
			if json.Unmarshal([]byte(s[i:j]), &c.name) != nil || c.name == "" {
				return i, stBad
			}
			c.named, i = true, j
		case slices.Contains(k.args, key):
			if hasArgs {
				return ks, stBad
			}
			hasArgs = true
			if s[i] == '"' {
				j, st := scanString(s, i)
				if st != stOK {
					return j, st
				}
				var inner string
				if json.Unmarshal([]byte(s[i:j]), &inner) != nil {
					return i, stBad
				}
				inner = strings.TrimSpace(inner)
				if !strings.HasPrefix(inner, "{") || !json.Valid([]byte(inner)) {
					return i, stBad
				}
				c.args, i = inner, j
				break
			}
			j, st := sc.args(i)
			if st != stOK {
				return j, st
			}
			i = j
		default:
			j, st := scanValue(s, i)
			if st != stOK {
				return j, st
			}
			i = j
		}
		i = skipWS(s, i)
	}
}

// args reads the current call's arguments, a JSON object at s[i], keeping
// what has been generated of it so far.
func (sc *scanner) args(i int) (int, status) {
	s := sc.s
	if i >= len(s) {
		return i, stMore
	}
	if s[i] != '{' {
		return i, stBad
	}
	j, st := scanValue(s, i)
	c := sc.cur()
	switch st {
	case stOK:
		c.args = s[i:j]
	case stMore:
		c.args = s[i:]
	case stBad:
		c.args = s[i:j] // what a stream released before the error
	}
	return j, st
}

// callArray reads a JSON array of call objects.
func (sc *scanner) callArray(i int, k keys) (int, status) {
	s := sc.s
	if i >= len(s) {
		return i, stMore
	}
	if s[i] != '[' {
		return i, stBad
	}
	i = skipWS(s, i+1)
	if i < len(s) && s[i] == ']' {
		return i + 1, stOK
	}
	for {
		j, st := sc.callObject(i, k)
		if st != stOK {
			return j, st
		}
		i = skipWS(s, j)
		if i >= len(s) {
			return i, stMore
		}
		switch s[i] {
		case ',':
			i = skipWS(s, i+1)
		case ']':
			return i + 1, stOK
		default:
			return i, stBad
		}
	}
}

// closing reads the literal that ends a section, after optional
// whitespace. The end of a complete output stands in for it: models often
// stop right after the last call.
func (sc *scanner) closing(i int, want string) (int, status) {
	s := sc.s
	i = skipWS(s, i)
	if i >= len(s) {
		if sc.final {
			return i, stOK
		}
		return i, stMore
	}
	j, st := lit(s, i, want)
	if st == stNo {
		return i, stBad
	}
	return j, st
}

// until reads the text up to delim; bad (a byte that cannot be in it)
// makes it stNo.
func until(s string, i int, delim string, bad string) (string, int, status) {
	k := strings.Index(s[i:], delim)
	if k < 0 {
		if strings.ContainsAny(s[i:], bad) {
			return "", i, stNo
		}
		return "", len(s), stMore
	}
	t := s[i : i+k]
	if t == "" || strings.ContainsAny(t, bad) {
		return "", i, stNo
	}
	return t, i + k + len(delim), stOK
}

// named starts a call whose name came outside JSON.
func (sc *scanner) named(name string) {
	sc.calls = append(sc.calls, pcall{name: name, named: true})
}
