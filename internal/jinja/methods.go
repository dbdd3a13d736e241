package jinja

import (
	"fmt"
	"strings"
	"unicode"
)

var strMethods = map[string]bool{
	"strip": true, "lstrip": true, "rstrip": true, "split": true, "rsplit": true,
	"startswith": true, "endswith": true, "upper": true, "lower": true, "title": true,
	"capitalize": true, "replace": true, "find": true, "rfind": true, "index": true,
	"count": true, "format": true, "join": true, "splitlines": true, "isdigit": true,
	"isalpha": true, "isalnum": true, "isspace": true, "isupper": true, "islower": true,
	"removeprefix": true, "removesuffix": true, "partition": true, "rpartition": true,
}

var dictMethods = map[string]bool{"get": true, "items": true, "keys": true, "values": true}

// mutators are the methods that the sandbox refuses (the reference
// environment is immutable).
var mutators = map[string]bool{
	"append": true, "pop": true, "extend": true, "insert": true, "remove": true,
	"clear": true, "update": true, "setdefault": true, "popitem": true, "sort": true, "reverse": true,
}

func isMethod(v any, name string) bool {
	switch v.(type) {
	case string:
		return strMethods[name]
	case *Map:
		return dictMethods[name] || mutators[name]
	case []any:
		return name == "index" || name == "count" || mutators[name]
	}
	return false
}

func (ev *evaluator) method(recv any, name string, args []any, kw *Map) (any, error) {
	if mutators[name] {
		return nil, fmt.Errorf("access to attribute '%s' of '%s' object is unsafe", name, typeName(recv))
	}
	switch r := recv.(type) {
	case string:
		return ev.strMethod(r, name, args, kw)
	case *Map:
		switch name {
		case "get":
			if len(args) == 0 {
				return nil, fmt.Errorf("get expected at least 1 argument")
			}
			if k, ok := mapKey(args[0]); ok {
				if v, ok := r.Get(k); ok {
					return v, nil
				}
			}
			if len(args) > 1 {
				return args[1], nil
			}
			return nil, nil
		case "items":
			out := make([]any, r.Len())
			for i, k := range r.keys {
				out[i] = Tuple{keyValue(k), r.vals[k]}
			}
			return out, ev.step(int64(len(out)))
		case "keys":
			out := make([]any, r.Len())
			for i, k := range r.keys {
				out[i] = keyValue(k)
			}
			return out, nil
		case "values":
			out := make([]any, r.Len())
			for i, k := range r.keys {
				out[i] = r.vals[k]
			}
			return out, nil
		}
	case []any:
		if len(args) != 1 {
			return nil, fmt.Errorf("%s takes one argument", name)
		}
		n := int64(0)
		for i, it := range r {
			if equal(it, args[0]) {
				if name == "index" {
					return int64(i), nil
				}
				n++
			}
		}
		if name == "index" {
			return nil, fmt.Errorf("value is not in list")
		}
		return n, nil
	}
	return nil, fmt.Errorf("'%s' object has no attribute '%s'", typeName(recv), name)
}

func strArg(args []any, i int) (string, bool) {
	if i >= len(args) || args[i] == nil {
		return "", false
	}
	s, ok := args[i].(string)
	return s, ok
}

func (ev *evaluator) strMethod(s, name string, args []any, kw *Map) (any, error) {
	if err := ev.step(int64(len(s)/256) + 1); err != nil {
		return nil, err
	}
	switch name {
	case "strip", "lstrip", "rstrip":
		chars, _ := strArg(args, 0)
		return pyStrip(s, chars, name != "rstrip", name != "lstrip"), nil
	case "upper":
		return strings.ToUpper(s), nil
	case "lower":
		return strings.ToLower(s), nil
	case "title":
		return title(s), nil
	case "capitalize":
		return capitalize(s), nil
	case "startswith", "endswith":
		if len(args) == 0 {
			return nil, fmt.Errorf("%s takes at least 1 argument", name)
		}
		var cands []any
		if t, ok := args[0].(Tuple); ok {
			cands = t
		} else {
			cands = []any{args[0]}
		}
		for _, c := range cands {
			p, ok := c.(string)
			if !ok {
				return nil, fmt.Errorf("%s first arg must be str or a tuple of str", name)
			}
			if name == "startswith" && strings.HasPrefix(s, p) || name == "endswith" && strings.HasSuffix(s, p) {
				return true, nil
			}
		}
		return false, nil
	case "split", "rsplit":
		sep, hasSep := strArg(args, 0)
		if v := arg(nil, kw, -1, "sep"); v != nil {
			sep, hasSep = str(v), true
		}
		n := int64(-1)
		if v := arg(args, kw, 1, "maxsplit"); v != nil {
			n, _ = integer(v)
		}
		var parts []string
		switch {
		case !hasSep:
			parts = fieldsN(s, int(n), name == "rsplit")
		case sep == "":
			return nil, fmt.Errorf("empty separator")
		case name == "rsplit" && n >= 0:
			parts = rsplitN(s, sep, int(n))
		default:
			if n >= 0 {
				parts = strings.SplitN(s, sep, int(n)+1)
			} else {
				parts = strings.Split(s, sep)
			}
		}
		if err := ev.step(int64(len(parts))); err != nil {
			return nil, err
		}
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return out, nil
	case "splitlines":
		if s == "" {
			return []any{}, nil
		}
		lines := splitLines(s)
		out := make([]any, len(lines))
		for i, l := range lines {
			out[i] = l
		}
		return out, nil
	case "replace":
		if len(args) < 2 {
			return nil, fmt.Errorf("replace expected at least 2 arguments")
		}
		n := -1
		if len(args) > 2 {
			x, _ := integer(args[2])
			n = int(x)
		}
		return ev.replace(s, str(args[0]), str(args[1]), n)
	case "find", "rfind", "index", "count":
		sub, ok := strArg(args, 0)
		if !ok {
			return nil, fmt.Errorf("%s takes a string", name)
		}
		switch name {
		case "count":
			if sub == "" {
				return int64(len([]rune(s)) + 1), nil
			}
			return int64(strings.Count(s, sub)), nil
		case "rfind":
			i := strings.LastIndex(s, sub)
			if i >= 0 {
				i = len([]rune(s[:i]))
			}
			return int64(i), nil
		}
		i := strings.Index(s, sub)
		if i >= 0 {
			i = len([]rune(s[:i]))
		} else if name == "index" {
			return nil, fmt.Errorf("substring not found")
		}
		return int64(i), nil
	case "join":
		if len(args) != 1 {
			return nil, fmt.Errorf("join takes one argument")
		}
		items, err := ev.iterate(args[0])
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(items))
		for i, it := range items {
			p, ok := it.(string)
			if !ok {
				return nil, fmt.Errorf("sequence item %d: expected str instance, %s found", i, typeName(it))
			}
			parts[i] = p
		}
		out := strings.Join(parts, s)
		return out, ev.produce(len(out))
	case "format":
		return ev.pyFormat(s, args, kw)
	case "removeprefix":
		p, _ := strArg(args, 0)
		return strings.TrimPrefix(s, p), nil
	case "removesuffix":
		p, _ := strArg(args, 0)
		return strings.TrimSuffix(s, p), nil
	case "partition", "rpartition":
		sep, ok := strArg(args, 0)
		if !ok || sep == "" {
			return nil, fmt.Errorf("%s needs a separator", name)
		}
		i := strings.Index(s, sep)
		if name == "rpartition" {
			i = strings.LastIndex(s, sep)
		}
		if i < 0 {
			if name == "rpartition" {
				return Tuple{"", "", s}, nil
			}
			return Tuple{s, "", ""}, nil
		}
		return Tuple{s[:i], sep, s[i+len(sep):]}, nil
	case "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower":
		if s == "" {
			return false, nil
		}
		cased := false
		for _, r := range s {
			ok := true
			switch name {
			case "isdigit":
				ok = unicode.IsDigit(r)
			case "isalpha":
				ok = unicode.IsLetter(r)
			case "isalnum":
				ok = unicode.IsLetter(r) || unicode.IsDigit(r)
			case "isspace":
				ok = unicode.IsSpace(r)
			case "isupper":
				ok = !unicode.IsLower(r)
				cased = cased || unicode.IsUpper(r)
			case "islower":
				ok = !unicode.IsUpper(r)
				cased = cased || unicode.IsLower(r)
			}
			if !ok {
				return false, nil
			}
		}
		if name == "isupper" || name == "islower" {
			return cased, nil
		}
		return true, nil
	}
	return nil, fmt.Errorf("'str' object has no attribute '%s'", name)
}

// fieldsN is Python's split() without a separator.
func fieldsN(s string, n int, fromRight bool) []string {
	f := strings.FieldsFunc(s, unicode.IsSpace)
	if n < 0 || len(f) <= n+1 {
		return f
	}
	if fromRight {
		// Keep the left remainder whole, from its first field.
		cut := strings.TrimRightFunc(s, unicode.IsSpace)
		var tail []string
		for range n {
			i := strings.LastIndexFunc(cut, unicode.IsSpace)
			tail = append([]string{cut[i+1:]}, tail...)
			cut = strings.TrimRightFunc(cut[:i+1], unicode.IsSpace)
		}
		return append([]string{strings.TrimLeftFunc(cut, unicode.IsSpace)}, tail...)
	}
	rest := strings.TrimLeftFunc(s, unicode.IsSpace)
	var out []string
	for range n {
		i := strings.IndexFunc(rest, unicode.IsSpace)
		out = append(out, rest[:i])
		rest = strings.TrimLeftFunc(rest[i:], unicode.IsSpace)
	}
	return append(out, rest)
}

func rsplitN(s, sep string, n int) []string {
	var out []string
	for range n {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		out = append([]string{s[i+len(sep):]}, out...)
		s = s[:i]
	}
	return append([]string{s}, out...)
}

// pyFormat is str.format for {}, {0} and {name} fields (no format specs
// beyond an empty one).
func (ev *evaluator) pyFormat(f string, args []any, kw *Map) (any, error) {
	var b strings.Builder
	auto := 0
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c == '}' {
			if i+1 < len(f) && f[i+1] == '}' {
				i++
			}
			b.WriteByte('}')
			continue
		}
		if c != '{' {
			b.WriteByte(c)
			continue
		}
		if i+1 < len(f) && f[i+1] == '{' {
			b.WriteByte('{')
			i++
			continue
		}
		j := strings.IndexByte(f[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("single '{' encountered in format string")
		}
		field := f[i+1 : i+j]
		i += j
		if k := strings.IndexAny(field, ":!"); k >= 0 {
			if field[k:] != ":" {
				return nil, fmt.Errorf("format specs are not supported: %q", field)
			}
			field = field[:k]
		}
		var v any
		switch {
		case field == "":
			if auto >= len(args) {
				return nil, fmt.Errorf("replacement index %d out of range", auto)
			}
			v = args[auto]
			auto++
		case field[0] >= '0' && field[0] <= '9':
			n := 0
			fmt.Sscanf(field, "%d", &n)
			if n >= len(args) {
				return nil, fmt.Errorf("replacement index %d out of range", n)
			}
			v = args[n]
		default:
			x := arg(nil, kw, -1, field)
			if x == nil {
				return nil, fmt.Errorf("KeyError: '%s'", field)
			}
			v = x
		}
		b.WriteString(str(v))
		if err := ev.checkSize(b.Len()); err != nil {
			return nil, err
		}
	}
	return b.String(), ev.produce(b.Len())
}
