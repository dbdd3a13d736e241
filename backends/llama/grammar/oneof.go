package grammar

import "fmt"

// checkDisjoint makes oneOf safe to emit as an alternation: it holds when
// no value can match two branches, shown by types that do not overlap or by
// a property both branches require whose const/enum values differ (a
// discriminated union). Anything it cannot show is an UnsupportedError.
func (c *converter) checkDisjoint(branches []any, path string, depth int) error {
	type info struct {
		types map[string]bool
		vals  map[string]bool // canonical const/enum values; nil when unconstrained
		obj   *object
	}
	infos := make([]info, len(branches))
	for i, b := range branches {
		d, err := c.deref(b, path, depth)
		if err != nil {
			return err
		}
		in := info{types: map[string]bool{}}
		o, ok := d.(*object)
		if !ok {
			in.types["any"] = true
			infos[i] = in
			continue
		}
		in.obj = o
		in.vals = constValues(o)
		if in.vals != nil {
			if raw, ok := o.get("enum"); ok {
				arr, _ := raw.([]any)
				for _, v := range arr {
					in.types[jsonType(v)] = true
				}
			} else {
				v, _ := o.get("const")
				in.types[jsonType(v)] = true
			}
		} else if _, hasType := o.get("type"); hasType || !hasCombinator(o) {
			ts, err := schemaTypes(o, path)
			if err != nil {
				return err
			}
			for _, t := range ts {
				in.types[t] = true
			}
		} else {
			in.types["any"] = true
		}
		if in.types["number"] {
			in.types["integer"] = true
		}
		infos[i] = in
	}
	for i := range infos {
		for j := i + 1; j < len(infos); j++ {
			a, b := infos[i], infos[j]
			if !overlap(a.types, b.types) {
				continue
			}
			if a.vals != nil && b.vals != nil && !overlap(a.vals, b.vals) {
				continue
			}
			if a.obj != nil && b.obj != nil && c.discriminated(a.obj, b.obj, path, depth) {
				continue
			}
			return &UnsupportedError{Keyword: "oneOf", Path: path,
				Reason: fmt.Sprintf("branches %d and %d may both match (exclusivity is enforced only for disjoint types, values or a discriminating property; anyOf is accepted)", i, j)}
		}
	}
	return nil
}

func hasCombinator(o *object) bool {
	for _, k := range []string{"anyOf", "oneOf", "allOf", "$ref"} {
		if _, ok := o.get(k); ok {
			return true
		}
	}
	return false
}

func overlap(a, b map[string]bool) bool {
	if a["any"] || b["any"] {
		return true
	}
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}

// constValues is the set of values a const or enum allows, nil without one.
func constValues(o *object) map[string]bool {
	if v, ok := o.get("const"); ok {
		return map[string]bool{canonical(v): true}
	}
	if raw, ok := o.get("enum"); ok {
		arr, ok := raw.([]any)
		if !ok {
			return nil
		}
		m := map[string]bool{}
		for _, v := range arr {
			m[canonical(v)] = true
		}
		return m
	}
	return nil
}

func jsonType(v any) string {
	switch v.(type) {
	case *object:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "number"
}

// discriminated reports whether a property required by both objects has
// disjoint const/enum values in each.
func (c *converter) discriminated(a, b *object, path string, depth int) bool {
	req := func(o *object) map[string]bool {
		m := map[string]bool{}
		if r, ok := o.get("required"); ok {
			if arr, ok := r.([]any); ok {
				for _, e := range arr {
					if s, ok := e.(string); ok {
						m[s] = true
					}
				}
			}
		}
		return m
	}
	prop := func(o *object, k string) map[string]bool {
		p, ok := o.get("properties")
		if !ok {
			return nil
		}
		po, ok := p.(*object)
		if !ok {
			return nil
		}
		s, ok := po.get(k)
		if !ok {
			return nil
		}
		d, err := c.deref(s, path, depth)
		if err != nil {
			return nil
		}
		if do, ok := d.(*object); ok {
			return constValues(do)
		}
		return nil
	}
	ra, rb := req(a), req(b)
	for k := range ra {
		if !rb[k] {
			continue
		}
		va, vb := prop(a, k), prop(b, k)
		if va != nil && vb != nil && !overlap(va, vb) {
			return true
		}
	}
	return false
}
