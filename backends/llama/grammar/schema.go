package grammar

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// ignored keywords describe a value without constraining it.
var ignored = map[string]bool{
	"title": true, "description": true, "examples": true, "example": true, "default": true,
	"$schema": true, "$id": true, "id": true, "$comment": true, "deprecated": true,
	"readOnly": true, "writeOnly": true, "$anchor": true, "$vocabulary": true,
	"contentMediaType": true, "contentEncoding": true, "discriminator": true,
	"markdownDescription": true, "$defs": true, "definitions": true, "strict": true,
}

// handled keywords are enforced (each by the code for its value type).
var handled = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"enum": true, "const": true, "items": true, "prefixItems": true, "additionalItems": true,
	"minItems": true, "maxItems": true, "$ref": true, "anyOf": true, "oneOf": true, "allOf": true,
	"minLength": true, "maxLength": true, "format": true, "pattern": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"nullable": true, "uniqueItems": true,
}

var typeOrder = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

// visit returns a GBNF expression for schema s (found at JSON pointer path),
// trailing whitespace included.
func (c *converter) visit(s any, path string, depth int) (string, error) {
	c.visits++
	if c.visits > c.lim.MaxVisits {
		return "", &LimitError{Limit: "MaxVisits", Max: c.lim.MaxVisits, Path: path}
	}
	if depth > c.lim.MaxDepth {
		return "", &LimitError{Limit: "MaxDepth", Max: c.lim.MaxDepth, Path: path}
	}
	switch t := s.(type) {
	case bool:
		if !t {
			return "", &InvalidError{Path: path, Reason: "schema false accepts nothing"}
		}
		return c.prim("value"), nil
	case *object:
		return c.visitObject(t, path, depth)
	default:
		return "", &InvalidError{Path: path, Reason: "a schema must be an object or a boolean"}
	}
}

func (c *converter) visitObject(s *object, path string, depth int) (string, error) {
	for _, k := range s.keys {
		if ignored[k] || strings.HasPrefix(k, "x-") || handled[k] {
			continue
		}
		return "", &UnsupportedError{Keyword: k, Path: path}
	}
	if u, ok := s.get("uniqueItems"); ok && u != false {
		return "", &UnsupportedError{Keyword: "uniqueItems", Path: path, Reason: "uniqueness cannot be enforced by a grammar"}
	}
	if n, ok := s.get("nullable"); ok {
		if n == true {
			inner := withoutKey(s, "nullable")
			e, err := c.visitObject(inner, path, depth)
			if err != nil {
				return "", err
			}
			return "(" + e + ") | " + c.prim("null"), nil
		}
		s = withoutKey(s, "nullable")
	}
	if ref, ok := s.get("$ref"); ok {
		if rest := assertions(s, "$ref"); len(rest.keys) > 0 {
			return c.visitAllOf([]any{refOnly(ref), rest}, path, depth)
		}
		return c.visitRef(ref, path, depth)
	}
	if all, ok := s.get("allOf"); ok {
		arr, ok := all.([]any)
		if !ok || len(arr) == 0 {
			return "", &InvalidError{Path: path + "/allOf", Reason: "allOf must be a non-empty array"}
		}
		rest := assertions(s, "allOf")
		if len(rest.keys) > 0 {
			arr = append(append([]any(nil), arr...), rest)
		}
		return c.visitAllOf(arr, path+"/allOf", depth)
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		alt, ok := s.get(kw)
		if !ok {
			continue
		}
		arr, ok := alt.([]any)
		if !ok || len(arr) == 0 {
			return "", &InvalidError{Path: path + "/" + kw, Reason: kw + " must be a non-empty array"}
		}
		if _, both := s.get("oneOf"); kw == "anyOf" && both {
			return "", &UnsupportedError{Keyword: "oneOf", Path: path, Reason: "anyOf and oneOf in one schema"}
		}
		if kw == "oneOf" && len(arr) > 1 {
			if err := c.checkDisjoint(arr, path+"/oneOf", depth+1); err != nil {
				return "", err
			}
		}
		rest := assertions(s, kw)
		var alts []string
		for i, b := range arr {
			bp := fmt.Sprintf("%s/%s/%d", path, kw, i)
			var e string
			var err error
			if len(rest.keys) > 0 {
				e, err = c.visitAllOf([]any{rest, b}, bp, depth+1)
			} else {
				e, err = c.visit(b, bp, depth+1)
			}
			if err != nil {
				return "", err
			}
			alts = append(alts, e)
		}
		return c.rule(path+"-"+kw, strings.Join(alts, " | "))
	}
	if v, ok := s.get("const"); ok {
		if err := onlyWith(s, path, "const", "type"); err != nil {
			return "", err
		}
		return lit(compact(v)) + " " + c.prim("space"), nil
	}
	if v, ok := s.get("enum"); ok {
		if err := onlyWith(s, path, "enum", "type"); err != nil {
			return "", err
		}
		return c.visitEnum(s, v, path)
	}
	types, err := schemaTypes(s, path)
	if err != nil {
		return "", err
	}
	var alts []string
	for _, t := range types {
		e, err := c.visitType(t, s, path, depth)
		if err != nil {
			return "", err
		}
		alts = append(alts, e)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return "(" + strings.Join(alts, " | ") + ")", nil
}

// schemaTypes is the schema's type list; without "type" it is inferred from
// the keywords present (a schema with none of them accepts any value).
func schemaTypes(s *object, path string) ([]string, error) {
	raw, ok := s.get("type")
	if !ok {
		has := func(ks ...string) bool {
			for _, k := range ks {
				if _, ok := s.get(k); ok {
					return true
				}
			}
			return false
		}
		var ts []string
		if has("properties", "required", "additionalProperties") {
			ts = append(ts, "object")
		}
		if has("items", "prefixItems", "minItems", "maxItems", "additionalItems") {
			ts = append(ts, "array")
		}
		if has("minLength", "maxLength", "pattern", "format") {
			ts = append(ts, "string")
		}
		if has("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") {
			ts = append(ts, "number")
		}
		if len(ts) == 0 {
			return []string{"any"}, nil
		}
		return ts, nil
	}
	var names []string
	switch t := raw.(type) {
	case string:
		names = []string{t}
	case []any:
		for _, e := range t {
			n, ok := e.(string)
			if !ok {
				return nil, &InvalidError{Path: path + "/type", Reason: "type names must be strings"}
			}
			names = append(names, n)
		}
	default:
		return nil, &InvalidError{Path: path + "/type", Reason: "type must be a string or an array"}
	}
	if len(names) == 0 {
		return nil, &InvalidError{Path: path + "/type", Reason: "empty type list accepts nothing"}
	}
	seen := map[string]bool{}
	for _, n := range names {
		known := false
		for _, k := range typeOrder {
			known = known || k == n
		}
		if !known {
			return nil, &InvalidError{Path: path + "/type", Reason: fmt.Sprintf("unknown type %q", n)}
		}
		seen[n] = true
	}
	if seen["number"] {
		delete(seen, "integer") // number includes integer
	}
	var ts []string
	for _, k := range typeOrder {
		if seen[k] {
			ts = append(ts, k)
		}
	}
	return ts, nil
}

func (c *converter) visitType(t string, s *object, path string, depth int) (string, error) {
	switch t {
	case "any":
		return c.prim("value"), nil
	case "object":
		return c.visitObjectType(s, path, depth)
	case "array":
		return c.visitArray(s, path, depth)
	case "string":
		return c.visitString(s, path)
	case "integer":
		return c.visitInteger(s, path)
	case "number":
		return c.visitNumber(s, path)
	case "boolean":
		return c.prim("boolean"), nil
	default: // null
		return c.prim("null"), nil
	}
}

// visitEnum emits each value the type list allows.
func (c *converter) visitEnum(s *object, v any, path string) (string, error) {
	vals, ok := v.([]any)
	if !ok || len(vals) == 0 {
		return "", &InvalidError{Path: path + "/enum", Reason: "enum must be a non-empty array"}
	}
	types := map[string]bool{}
	if _, ok := s.get("type"); ok {
		ts, err := schemaTypes(s, path)
		if err != nil {
			return "", err
		}
		for _, t := range ts {
			types[t] = true
		}
	}
	var alts []string
	seen := map[string]bool{}
	for _, e := range vals {
		if len(types) > 0 && !typeMatches(e, types) {
			continue
		}
		l := lit(compact(e))
		if seen[l] {
			continue
		}
		seen[l] = true
		alts = append(alts, l)
	}
	if len(alts) == 0 {
		return "", &InvalidError{Path: path + "/enum", Reason: "no enum value has the schema's type"}
	}
	return c.rule(path+"-enum", "("+strings.Join(alts, " | ")+") "+c.prim("space"))
}

func typeMatches(v any, types map[string]bool) bool {
	switch t := v.(type) {
	case *object:
		return types["object"]
	case []any:
		return types["array"]
	case string:
		return types["string"]
	case bool:
		return types["boolean"]
	case nil:
		return types["null"]
	case json.Number:
		if types["number"] {
			return true
		}
		if _, err := strconv.ParseInt(t.String(), 10, 64); err == nil {
			return types["integer"]
		}
	}
	return false
}

// onlyWith fails when s has an assertion besides kw and the allowed ones.
func onlyWith(s *object, path, kw string, allowed ...string) error {
	for _, k := range s.keys {
		if k == kw || ignored[k] || strings.HasPrefix(k, "x-") {
			continue
		}
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			return &UnsupportedError{Keyword: k, Path: path, Reason: "combined with " + kw}
		}
	}
	return nil
}

// assertions is s without descriptive keywords and without drop.
func assertions(s *object, drop string) *object {
	out := newObject()
	for _, k := range s.keys {
		if k == drop || ignored[k] || strings.HasPrefix(k, "x-") {
			continue
		}
		out.set(k, s.m[k])
	}
	return out
}

func withoutKey(s *object, drop string) *object {
	out := newObject()
	for _, k := range s.keys {
		if k != drop {
			out.set(k, s.m[k])
		}
	}
	return out
}

func refOnly(ref any) *object {
	o := newObject()
	o.set("$ref", ref)
	return o
}

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
