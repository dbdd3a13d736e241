package grammar

import (
	"encoding/json"
	"fmt"
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
		if k == "propertyNames" && anyString(s.m[k]) {
			continue // every key is a string: no constraint
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

// anyString reports whether schema v accepts every string: true, {} or
// {"type": "string"}, with descriptive keywords only (what a JSON Schema
// generator writes as propertyNames for a map keyed by any string).
func anyString(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case *object:
		for _, k := range v.keys {
			if ignored[k] || strings.HasPrefix(k, "x-") || k == "type" && v.m[k] == "string" {
				continue
			}
			return false
		}
		return true
	}
	return false
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
