package grammar

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// resolve finds the schema a local $ref points to.
func (c *converter) resolve(ref any, path string) (any, string, error) {
	r, ok := ref.(string)
	if !ok {
		return nil, "", &InvalidError{Path: path + "/$ref", Reason: "$ref must be a string"}
	}
	if !strings.HasPrefix(r, "#") {
		return nil, "", &UnsupportedError{Keyword: "$ref", Path: path, Reason: fmt.Sprintf("only local references (#...) are supported, not %q", r)}
	}
	frag, err := url.PathUnescape(r[1:])
	if err != nil {
		return nil, "", &InvalidError{Path: path + "/$ref", Reason: "bad escape in " + r}
	}
	if frag != "" && !strings.HasPrefix(frag, "/") {
		return nil, "", &UnsupportedError{Keyword: "$ref", Path: path, Reason: fmt.Sprintf("anchor references are not supported (%q)", r)}
	}
	cur := c.root
	if frag != "" {
		for _, tok := range strings.Split(frag[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch t := cur.(type) {
			case *object:
				v, ok := t.get(tok)
				if !ok {
					return nil, "", &InvalidError{Path: path + "/$ref", Reason: fmt.Sprintf("%q points nowhere", r)}
				}
				cur = v
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(t) {
					return nil, "", &InvalidError{Path: path + "/$ref", Reason: fmt.Sprintf("%q points nowhere", r)}
				}
				cur = t[i]
			default:
				return nil, "", &InvalidError{Path: path + "/$ref", Reason: fmt.Sprintf("%q points nowhere", r)}
			}
		}
	}
	return cur, frag, nil
}

// visitRef emits a rule per referenced schema, shared by every use, so
// recursive schemas give recursive rules. A reference reached again before
// any text was consumed would be left recursion: an error.
func (c *converter) visitRef(ref any, path string, depth int) (string, error) {
	target, frag, err := c.resolve(ref, path)
	if err != nil {
		return "", err
	}
	if c.left[frag] {
		return "", &InvalidError{Path: path, Reason: fmt.Sprintf("$ref %q refers to itself without consuming any text", "#"+frag)}
	}
	if name, ok := c.refs[frag]; ok {
		return name, nil
	}
	hint := frag
	if i := strings.LastIndex(frag, "/"); i >= 0 {
		hint = frag[i+1:]
	}
	if hint == "" {
		hint = "root"
	}
	name, err := c.newRule("ref-" + hint)
	if err != nil {
		return "", err
	}
	c.refs[frag] = name
	c.left[frag] = true
	body, err := c.visit(target, frag, depth+1)
	delete(c.left, frag)
	if err != nil {
		return "", err
	}
	c.rules[name] = body
	return name, nil
}

// consume runs f after a token has been consumed: references pending left
// recursion are safe again inside it.
func (c *converter) consume(f func() (string, error)) (string, error) {
	saved := c.left
	c.left = map[string]bool{}
	defer func() { c.left = saved }()
	return f()
}

// deref returns s with a top-level $ref replaced by its target (repeatedly).
func (c *converter) deref(s any, path string, depth int) (any, error) {
	for i := 0; ; i++ {
		o, ok := s.(*object)
		if !ok {
			return s, nil
		}
		ref, ok := o.get("$ref")
		if !ok {
			return s, nil
		}
		if i > c.lim.MaxDepth || depth+i > c.lim.MaxDepth {
			return nil, &LimitError{Limit: "MaxDepth", Max: c.lim.MaxDepth, Path: path}
		}
		target, _, err := c.resolve(ref, path)
		if err != nil {
			return nil, err
		}
		rest := assertions(o, "$ref")
		if len(rest.keys) == 0 {
			s = target
			continue
		}
		merged, err := c.merge(target, rest, path, depth+i+1)
		if err != nil {
			return nil, err
		}
		s = merged
	}
}

// visitAllOf merges the members into one schema and visits it.
func (c *converter) visitAllOf(members []any, path string, depth int) (string, error) {
	if depth > c.lim.MaxDepth {
		return "", &LimitError{Limit: "MaxDepth", Max: c.lim.MaxDepth, Path: path}
	}
	var acc any = true
	for i, m := range members {
		var err error
		acc, err = c.merge(acc, m, fmt.Sprintf("%s/%d", path, i), depth+1)
		if err != nil {
			return "", err
		}
	}
	return c.visit(acc, path, depth+1)
}

// merge is the conjunction of two schemas, for the cases a single schema
// can state: property maps merged, required lists united, types
// intersected, other keywords equal or present on one side only.
func (c *converter) merge(a, b any, path string, depth int) (any, error) {
	c.visits++
	if c.visits > c.lim.MaxVisits {
		return nil, &LimitError{Limit: "MaxVisits", Max: c.lim.MaxVisits, Path: path}
	}
	if depth > c.lim.MaxDepth {
		return nil, &LimitError{Limit: "MaxDepth", Max: c.lim.MaxDepth, Path: path}
	}
	var err error
	if a, err = c.deref(a, path, depth); err != nil {
		return nil, err
	}
	if b, err = c.deref(b, path, depth); err != nil {
		return nil, err
	}
	if a == true {
		return b, nil
	}
	if b == true {
		return a, nil
	}
	ao, aok := a.(*object)
	bo, bok := b.(*object)
	if !aok || !bok {
		return nil, &InvalidError{Path: path, Reason: "allOf member false or not a schema"}
	}
	if _, ok := ao.get("allOf"); ok {
		return c.mergeNested(ao, bo, path, depth)
	}
	if _, ok := bo.get("allOf"); ok {
		return c.mergeNested(bo, ao, path, depth)
	}
	out := newObject()
	for _, k := range ao.keys {
		if !ignored[k] && !strings.HasPrefix(k, "x-") {
			out.set(k, ao.m[k])
		}
	}
	for _, k := range bo.keys {
		if ignored[k] || strings.HasPrefix(k, "x-") {
			continue
		}
		bv := bo.m[k]
		av, ok := out.get(k)
		if !ok {
			out.set(k, bv)
			continue
		}
		switch k {
		case "properties":
			ap, aok := av.(*object)
			bp, bok := bv.(*object)
			if !aok || !bok {
				return nil, &InvalidError{Path: path, Reason: "properties must be an object"}
			}
			mp := newObject()
			for _, pk := range ap.keys {
				mp.set(pk, ap.m[pk])
			}
			for _, pk := range bp.keys {
				if x, ok := mp.get(pk); ok {
					m, err := c.merge(x, bp.m[pk], path+"/properties/"+pk, depth+1)
					if err != nil {
						return nil, err
					}
					mp.set(pk, m)
				} else {
					mp.set(pk, bp.m[pk])
				}
			}
			out.set(k, mp)
		case "required":
			ar, _ := av.([]any)
			br, _ := bv.([]any)
			union := append([]any(nil), ar...)
			for _, r := range br {
				dup := false
				for _, x := range union {
					dup = dup || x == r
				}
				if !dup {
					union = append(union, r)
				}
			}
			out.set(k, union)
		case "type":
			t, err := intersectTypes(av, bv, path)
			if err != nil {
				return nil, err
			}
			out.set(k, t)
		default:
			if !equalJSON(av, bv) {
				return nil, &UnsupportedError{Keyword: "allOf", Path: path, Reason: fmt.Sprintf("members disagree on %q", k)}
			}
		}
	}
	if err := checkClosed(ao, out, path); err != nil {
		return nil, err
	}
	if err := checkClosed(bo, out, path); err != nil {
		return nil, err
	}
	return out, nil
}

// mergeNested flattens an allOf inside an allOf member.
func (c *converter) mergeNested(withAll, other *object, path string, depth int) (any, error) {
	arr, ok := withAll.m["allOf"].([]any)
	if !ok {
		return nil, &InvalidError{Path: path + "/allOf", Reason: "allOf must be an array"}
	}
	var acc any = assertions(withAll, "allOf")
	for i, m := range arr {
		var err error
		if acc, err = c.merge(acc, m, fmt.Sprintf("%s/allOf/%d", path, i), depth+1); err != nil {
			return nil, err
		}
	}
	return c.merge(acc, other, path, depth+1)
}

// checkClosed rejects a merge that adds properties to a member closed with
// additionalProperties: false (that member would reject them).
func checkClosed(member, merged *object, path string) error {
	ap, ok := member.get("additionalProperties")
	if !ok || ap != false {
		return nil
	}
	own := map[string]bool{}
	if p, ok := member.get("properties"); ok {
		if po, ok := p.(*object); ok {
			for _, k := range po.keys {
				own[k] = true
			}
		}
	}
	if p, ok := merged.get("properties"); ok {
		if po, ok := p.(*object); ok {
			for _, k := range po.keys {
				if !own[k] {
					return &UnsupportedError{Keyword: "allOf", Path: path, Reason: fmt.Sprintf("property %q added to a member with additionalProperties false", k)}
				}
			}
		}
	}
	return nil
}

func intersectTypes(a, b any, path string) (any, error) {
	list := func(v any) map[string]bool {
		m := map[string]bool{}
		switch t := v.(type) {
		case string:
			m[t] = true
		case []any:
			for _, e := range t {
				if s, ok := e.(string); ok {
					m[s] = true
				}
			}
		}
		if m["number"] {
			m["integer"] = true
		}
		return m
	}
	am, bm := list(a), list(b)
	var out []any
	for _, t := range typeOrder {
		if am[t] && bm[t] {
			if t == "integer" && am["number"] && bm["number"] {
				continue
			}
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, &InvalidError{Path: path, Reason: "allOf members have no type in common"}
	}
	return out, nil
}
