package grammar

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

func (c *converter) visitObjectType(s *object, path string, depth int) (string, error) {
	props := newObject()
	if p, ok := s.get("properties"); ok {
		po, ok := p.(*object)
		if !ok {
			return "", &InvalidError{Path: path + "/properties", Reason: "properties must be an object"}
		}
		props = po
	}
	required := map[string]bool{}
	var reqOrder []string
	if r, ok := s.get("required"); ok {
		arr, ok := r.([]any)
		if !ok {
			return "", &InvalidError{Path: path + "/required", Reason: "required must be an array of strings"}
		}
		for _, e := range arr {
			n, ok := e.(string)
			if !ok {
				return "", &InvalidError{Path: path + "/required", Reason: "required must be an array of strings"}
			}
			if !required[n] {
				required[n] = true
				reqOrder = append(reqOrder, n)
			}
		}
	}
	var extra any // nil: no extra properties produced
	if ap, ok := s.get("additionalProperties"); ok {
		switch t := ap.(type) {
		case bool:
			if t {
				extra = true
			}
		case *object:
			extra = t
		default:
			return "", &InvalidError{Path: path + "/additionalProperties", Reason: "must be a boolean or a schema"}
		}
	}
	// Required names without a declared schema take any value, unless the
	// object is closed.
	for _, n := range reqOrder {
		if _, ok := props.get(n); ok {
			continue
		}
		if extra == nil {
			if ap, ok := s.get("additionalProperties"); ok && ap == false {
				return "", &InvalidError{Path: path + "/required", Reason: fmt.Sprintf("required property %q is not allowed by additionalProperties false", n)}
			}
			props = withKey(props, n, true)
			continue
		}
		props = withKey(props, n, extra)
	}
	return c.consume(func() (string, error) {
		// Required properties in declaration order, then each optional
		// one in order or not, then any number of additional ones.
		type member struct {
			kv   string
			many bool
		}
		var req []string
		var opt []member
		for _, k := range props.keys {
			kv, err := c.keyValue(k, props.m[k], path+"/properties/"+escapePointer(k), depth)
			if err != nil {
				return "", err
			}
			if required[k] {
				req = append(req, kv)
			} else {
				opt = append(opt, member{kv: kv})
			}
		}
		if extra != nil {
			kv, err := c.extraKeyValue(props, extra, path+"/additionalProperties", depth)
			if err != nil {
				return "", err
			}
			opt = append(opt, member{kv: kv, many: true})
		}
		sp := c.prim("space")
		tail := func(m member) string {
			if m.many {
				return `("," ` + sp + " " + m.kv + ")*"
			}
			return `("," ` + sp + " " + m.kv + ")?"
		}
		var body string
		switch {
		case len(req) > 0:
			body = strings.Join(req, ` "," `+sp+" ")
			for _, o := range opt {
				body += " " + tail(o)
			}
		case len(opt) > 0:
			// Whichever member comes first, then the rest as above.
			tails := make([]string, len(opt)+1)
			for i := len(opt) - 1; i >= 0; i-- {
				t := tail(opt[i])
				if tails[i+1] != "" {
					t += " " + tails[i+1]
				}
				name, err := c.rule(path+"-tail", t)
				if err != nil {
					return "", err
				}
				tails[i] = name
			}
			var alts []string
			for i, o := range opt {
				next := tails[i+1]
				if o.many {
					next = tails[i]
				}
				if next != "" {
					alts = append(alts, o.kv+" "+next)
				} else {
					alts = append(alts, o.kv)
				}
			}
			body = "(" + strings.Join(alts, " | ") + ")?"
		}
		return c.rule(path+"-object", `"{" `+sp+" "+body+` "}" `+sp)
	})
}

func withKey(o *object, k string, v any) *object {
	out := newObject()
	for _, x := range o.keys {
		out.set(x, o.m[x])
	}
	out.set(k, v)
	return out
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// keyValue is `"key": value`.
func (c *converter) keyValue(k string, schema any, path string, depth int) (string, error) {
	v, err := c.visit(schema, path, depth+1)
	if err != nil {
		return "", err
	}
	return lit(compact(k)) + " " + c.prim("space") + ` ":" ` + c.prim("space") + " " + v, nil
}

// extraKeyValue is one additional property: a key none of the declared
// ones (written without escapes, so it cannot spell one in disguise) and a
// value of the additionalProperties schema.
func (c *converter) extraKeyValue(props *object, extra any, path string, depth int) (string, error) {
	key, err := c.keyNotIn(props.keys, path)
	if err != nil {
		return "", err
	}
	v, err := c.visit(extra, path, depth+1)
	if err != nil {
		return "", err
	}
	return key + ` ":" ` + c.prim("space") + " " + v, nil
}

// keyNotIn is a JSON string key that is none of names: a trie of the names
// where every node may leave the trie (or end, where no name ends).
func (c *converter) keyNotIn(names []string, path string) (string, error) {
	const keyChar = `[^"\\\x7F\x00-\x1F]`
	sp := c.prim("space")
	if len(names) == 0 {
		return c.rule("key", `"\"" `+keyChar+`* "\"" `+sp)
	}
	type node struct {
		children map[rune]*node
		order    []rune
		end      bool
	}
	root := &node{children: map[rune]*node{}}
	for _, n := range names {
		cur := root
		for _, r := range n {
			nx, ok := cur.children[r]
			if !ok {
				nx = &node{children: map[rune]*node{}}
				cur.children[r] = nx
				cur.order = append(cur.order, r)
			}
			cur = nx
		}
		cur.end = true
	}
	var emit func(n *node) (string, error)
	emit = func(n *node) (string, error) {
		name, err := c.newRule(path + "-key")
		if err != nil {
			return "", err
		}
		var alts []string
		if !n.end {
			alts = append(alts, `"\""`)
		}
		var cls strings.Builder
		for _, r := range n.order {
			child, err := emit(n.children[r])
			if err != nil {
				return "", err
			}
			if r == '"' || r == '\\' || r < 0x20 || r == 0x7f {
				continue // never written unescaped: that branch is unreachable
			}
			alts = append(alts, lit(string(r))+" "+child)
			cls.WriteString(classChar(r))
		}
		alts = append(alts, `[^"\\\x7F\x00-\x1F`+cls.String()+`] `+keyChar+`* "\""`)
		c.rules[name] = strings.Join(alts, " | ")
		return name, nil
	}
	first, err := emit(root)
	if err != nil {
		return "", err
	}
	return `"\"" ` + first + " " + sp, nil
}

func (c *converter) visitArray(s *object, path string, depth int) (string, error) {
	min, max, err := countBounds(s, "minItems", "maxItems", path)
	if err != nil {
		return "", err
	}
	var prefix []any
	if p, ok := s.get("prefixItems"); ok {
		arr, ok := p.([]any)
		if !ok {
			return "", &InvalidError{Path: path + "/prefixItems", Reason: "prefixItems must be an array"}
		}
		prefix = arr
	}
	var items any = nil // nil: none beyond the prefix when there is one, else any value
	if it, ok := s.get("items"); ok {
		if arr, isTuple := it.([]any); isTuple { // draft-07 tuple form
			if prefix != nil {
				return "", &InvalidError{Path: path + "/items", Reason: "items array alongside prefixItems"}
			}
			prefix = arr
			if ai, ok := s.get("additionalItems"); ok {
				items = ai
			}
		} else {
			items = it
		}
	} // additionalItems without a tuple constrains nothing
	if prefix == nil && items == nil {
		items = true
	}
	if items == false {
		items = nil
	}
	return c.consume(func() (string, error) {
		sp := c.prim("space")
		sep := `"," ` + sp
		n := len(prefix)
		if max >= 0 && n > max {
			n = max // a shorter array still satisfies prefixItems
		}
		var seq []string
		for i := 0; i < n; i++ {
			e, err := c.visit(prefix[i], fmt.Sprintf("%s/prefixItems/%d", path, i), depth+1)
			if err != nil {
				return "", err
			}
			seq = append(seq, e)
		}
		if items == nil && n < min {
			return "", &InvalidError{Path: path, Reason: "minItems above the items the schema allows"}
		}
		var body string
		if n > 0 {
			body = strings.Join(seq, " "+sep+" ")
		}
		if items != nil {
			item, err := c.visit(items, path+"/items", depth+1)
			if err != nil {
				return "", err
			}
			lo := min - n
			if lo < 0 {
				lo = 0
			}
			hi := -1
			if max >= 0 {
				hi = max - n
			}
			if hi != 0 {
				if n > 0 {
					r, _, err := c.repeatExpr(sep+" "+item, lo, hi, 1, path)
					if err != nil {
						return "", err
					}
					body += " " + r
				} else {
					// first item, then the others after commas
					rlo, rhi := lo-1, hi-1
					if rlo < 0 {
						rlo = 0
					}
					if hi < 0 {
						rhi = -1
					}
					rest, _, err := c.repeatExpr(sep+" "+item, rlo, rhi, 1, path)
					if err != nil {
						return "", err
					}
					body = item
					if rest != "" {
						body += " " + rest
					}
					if lo == 0 {
						// an empty alternative, not "?": llama.cpp counts the
						// rules a repetition inside would multiply
						body = "(" + body + " | )"
					}
				}
			}
		}
		return c.rule(path+"-array", `"[" `+sp+" "+body+` "]" `+sp)
	})
}

// countBounds reads a pair of non-negative integer keywords (max -1: none).
func countBounds(s *object, minKey, maxKey, path string) (int, int, error) {
	get := func(k string, def int) (int, error) {
		v, ok := s.get(k)
		if !ok {
			return def, nil
		}
		n, ok := v.(json.Number)
		if !ok {
			return 0, &InvalidError{Path: path + "/" + k, Reason: k + " must be a number"}
		}
		i, err := n.Int64()
		if err != nil || i < 0 {
			return 0, &InvalidError{Path: path + "/" + k, Reason: k + " must be a non-negative integer"}
		}
		if i > 1<<30 {
			return 0, &LimitError{Limit: "MaxRepeat", Max: 1 << 30, Path: path + "/" + k}
		}
		return int(i), nil
	}
	min, err := get(minKey, 0)
	if err != nil {
		return 0, 0, err
	}
	max, err := get(maxKey, -1)
	if err != nil {
		return 0, 0, err
	}
	if max >= 0 && max < min {
		return 0, 0, &InvalidError{Path: path, Reason: fmt.Sprintf("%s below %s", maxKey, minKey)}
	}
	return min, max, nil
}

// formats are the string formats enforced, as the text between the quotes.
var formats = map[string]string{
	"date":     `[12] [0-9]{3} "-" ( ("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8]) )`,
	"time":     `([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])`,
	"uuid":     `[0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12}`,
	"email":    `[a-zA-Z0-9_+-]{1,16} ("." [a-zA-Z0-9_+-]{1,14}){0,3} "@" ` + hostnameExpr,
	"hostname": hostnameExpr,
	"ipv4":     `(` + octetExpr + `) "." (` + octetExpr + `) "." (` + octetExpr + `) "." (` + octetExpr + `)`,
	"uri": `("http" | "https") "://" ` + hostnameExpr + ` (":" [1-9] [0-9]{0,3})? ("/" [a-zA-Z0-9._~-]{0,16}){0,4}` +
		` ("?" [a-zA-Z0-9._~-]{1,12} "=" [a-zA-Z0-9._~-]{0,12})?`,
}

// hostnameExpr is a host name of at most four short labels and a
// top-level domain of letters.
const hostnameExpr = `[a-z0-9] ([a-z0-9-]{0,20} [a-z0-9])? ("." [a-z0-9] ([a-z0-9-]{0,20} [a-z0-9])?){0,3} "." [a-z]{2,8}`

// octetExpr is 0..255 without leading zeros.
const octetExpr = `[0-9] | [1-9] [0-9] | "1" [0-9]{2} | "2" [0-4] [0-9] | "25" [0-5]`

func (c *converter) visitString(s *object, path string) (string, error) {
	sp := c.prim("space")
	_, hasMin := s.get("minLength")
	_, hasMax := s.get("maxLength")
	f, hasFormat := s.get("format")
	p, hasPattern := s.get("pattern")
	if hasFormat && hasPattern {
		return "", &UnsupportedError{Keyword: "pattern", Path: path, Reason: "pattern combined with format"}
	}
	if (hasFormat || hasPattern) && (hasMin || hasMax) {
		kw := "minLength"
		if !hasMin {
			kw = "maxLength"
		}
		return "", &UnsupportedError{Keyword: kw, Path: path, Reason: "length bounds combined with format or pattern"}
	}
	if hasFormat {
		name, _ := f.(string)
		body, ok := formats[name]
		if name == "date-time" {
			body, ok = formats["date"]+` "T" `+formats["time"], true
		}
		if !ok {
			return "", &UnsupportedError{Keyword: "format", Path: path, Reason: fmt.Sprintf("format %q is not enforced (supported: date, time, date-time, uuid, email, hostname, ipv4, uri)", name)}
		}
		return c.rule(path+"-"+name, `"\"" `+body+` "\"" `+sp)
	}
	if hasPattern {
		ps, ok := p.(string)
		if !ok {
			return "", &InvalidError{Path: path + "/pattern", Reason: "pattern must be a string"}
		}
		body, err := c.pattern(ps, path)
		if err != nil {
			return "", err
		}
		return c.rule(path+"-pattern", `"\"" `+body+` "\"" `+sp)
	}
	if !hasMin && !hasMax {
		return c.prim("string"), nil
	}
	min, max, err := countBounds(s, "minLength", "maxLength", path)
	if err != nil {
		return "", err
	}
	r, _, err := c.repeatExpr(c.prim("char"), min, max, 1, path)
	if err != nil {
		return "", err
	}
	return c.rule(path+"-string", `"\"" `+r+` "\"" `+sp)
}

// classChar escapes r for use inside a GBNF character class.
func classChar(r rune) string {
	switch {
	case r == ']' || r == '[' || r == '\\' || r == '"':
		return `\` + string(r)
	case r == '-' || r == '^':
		return fmt.Sprintf(`\x%02X`, r)
	case r < 0x20 || r == 0x7f:
		return fmt.Sprintf(`\x%02X`, r)
	case !utf8.ValidRune(r):
		return ""
	}
	return string(r)
}
