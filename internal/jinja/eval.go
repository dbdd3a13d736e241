package jinja

import (
	"fmt"
	"strings"
)

// builtin is a function a template can call.
type builtin func(ev *evaluator, args []any, kw *Map) (any, error)

// boundMethod is a method of a value (s.strip, d.items).
type boundMethod struct {
	recv any
	name string
}

func (ev *evaluator) eval(x expr, sc *scope) (any, error) {
	if err := ev.step(1); err != nil {
		return nil, err
	}
	switch x := x.(type) {
	case *litExpr:
		return x.v, nil
	case *nameExpr:
		if v, ok := sc.lookup(x.name); ok {
			return v, nil
		}
		return Undefined{Name: x.name}, nil
	case *attrExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		return getAttr(v, x.name)
	case *itemExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		k, err := ev.eval(x.key, sc)
		if err != nil {
			return nil, err
		}
		return getItem(v, k)
	case *sliceExpr:
		return ev.slice(x, sc)
	case *callExpr:
		fn, err := ev.eval(x.fn, sc)
		if err != nil {
			return nil, err
		}
		args, kw, err := ev.args(x.args, x.kwargs, sc)
		if err != nil {
			return nil, err
		}
		return ev.call(fn, args, kw)
	case *filterExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		return ev.applyFilter(x, v, sc)
	case *testExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		args, _, err := ev.args(x.args, nil, sc)
		if err != nil {
			return nil, err
		}
		ok, err := ev.test(x.name, v, args)
		if err != nil {
			return nil, err
		}
		return ok != x.negate, nil
	case *unaryExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		switch x.op {
		case "not":
			return !truthy(v), nil
		case "-":
			switch n := v.(type) {
			case int64:
				return -n, nil
			case float64:
				return -n, nil
			case bool:
				i, _ := integer(n)
				return -i, nil
			}
			return nil, fmt.Errorf("bad operand type for unary -: '%s'", typeName(v))
		default:
			if _, ok := number(v); !ok {
				return nil, fmt.Errorf("bad operand type for unary +: '%s'", typeName(v))
			}
			return v, nil
		}
	case *binExpr:
		a, err := ev.eval(x.a, sc)
		if err != nil {
			return nil, err
		}
		switch x.op {
		case "and":
			if !truthy(a) {
				return a, nil
			}
			return ev.eval(x.b, sc)
		case "or":
			if truthy(a) {
				return a, nil
			}
			return ev.eval(x.b, sc)
		}
		b, err := ev.eval(x.b, sc)
		if err != nil {
			return nil, err
		}
		return ev.binary(x.op, a, b)
	case *cmpExpr:
		a, err := ev.eval(x.first, sc)
		if err != nil {
			return nil, err
		}
		for i, op := range x.ops {
			b, err := ev.eval(x.rest[i], sc)
			if err != nil {
				return nil, err
			}
			ok, err := cmpOp(op, a, b)
			if err != nil || !ok {
				return false, err
			}
			a = b
		}
		return true, nil
	case *condExpr:
		c, err := ev.eval(x.cond, sc)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return ev.eval(x.a, sc)
		}
		if x.b == nil {
			return Undefined{}, nil
		}
		return ev.eval(x.b, sc)
	case *listExpr:
		out := make([]any, len(x.items))
		for i, it := range x.items {
			v, err := ev.eval(it, sc)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		if x.tuple {
			return Tuple(out), nil
		}
		return out, nil
	case *dictExpr:
		m := NewMap()
		for i := range x.keys {
			k, err := ev.eval(x.keys[i], sc)
			if err != nil {
				return nil, err
			}
			v, err := ev.eval(x.vals[i], sc)
			if err != nil {
				return nil, err
			}
			ks, ok := mapKey(k)
			if !ok {
				return nil, fmt.Errorf("dict keys must be strings here, not %s", typeName(k))
			}
			m.Set(ks, v)
		}
		return m, nil
	}
	return nil, fmt.Errorf("unknown expression %T", x)
}

func (ev *evaluator) args(xs []expr, kws []kwarg, sc *scope) ([]any, *Map, error) {
	var args []any
	for _, a := range xs {
		v, err := ev.eval(a, sc)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, v)
	}
	var kw *Map
	if len(kws) > 0 {
		kw = NewMap()
		for _, k := range kws {
			v, err := ev.eval(k.x, sc)
			if err != nil {
				return nil, nil, err
			}
			kw.Set(k.name, v)
		}
	}
	return args, kw, nil
}

func (ev *evaluator) call(fn any, args []any, kw *Map) (any, error) {
	if err := ev.step(1); err != nil {
		return nil, err
	}
	switch f := fn.(type) {
	case builtin:
		return f(ev, args, kw)
	case *macro:
		return ev.callMacro(f, args, kw, nil)
	case boundMethod:
		return ev.method(f.recv, f.name, args, kw)
	case *loopObj:
		if f.rec == nil {
			return nil, fmt.Errorf("loop() outside a recursive loop")
		}
		if len(args) != 1 {
			return nil, fmt.Errorf("loop() takes one argument")
		}
		return f.rec(args[0])
	case Undefined:
		if f.Name != "" {
			return nil, fmt.Errorf("'%s' is undefined", f.Name)
		}
		return nil, fmt.Errorf("call of an undefined value")
	}
	return nil, fmt.Errorf("'%s' object is not callable", typeName(fn))
}

// getAttr is Jinja's x.name: the attribute (a method), else the item.
func getAttr(v any, name string) (any, error) {
	v = demark(v)
	switch x := v.(type) {
	case Undefined:
		if x.Name != "" {
			return nil, fmt.Errorf("'%s' is undefined", x.Name)
		}
		return nil, fmt.Errorf("attribute '%s' of an undefined value", name)
	case *Map:
		if !x.ns && isMethod(v, name) {
			return boundMethod{recv: v, name: name}, nil
		}
		if val, ok := x.Get(name); ok {
			return val, nil
		}
		return Undefined{Name: name}, nil
	case *loopObj:
		if val, ok := x.attr(name); ok {
			return val, nil
		}
		return Undefined{Name: name}, nil
	}
	if isMethod(v, name) {
		return boundMethod{recv: v, name: name}, nil
	}
	return Undefined{Name: name}, nil
}

// getItem is Jinja's x[key]: the item, else the attribute.
func getItem(v any, key any) (any, error) {
	v, key = demark(v), demark(key)
	switch x := v.(type) {
	case Undefined:
		if x.Name != "" {
			return nil, fmt.Errorf("'%s' is undefined", x.Name)
		}
		return nil, fmt.Errorf("item of an undefined value")
	case *Map:
		if k, ok := mapKey(key); ok {
			if val, ok := x.Get(k); ok {
				return val, nil
			}
			if s, isStr := key.(string); isStr {
				return getAttrOnly(v, s), nil
			}
		}
		return Undefined{}, nil
	case string:
		if i, ok := integer(key); ok {
			rs := []rune(x)
			if i < 0 {
				i += int64(len(rs))
			}
			if i < 0 || i >= int64(len(rs)) {
				return Undefined{}, nil
			}
			return string(rs[i]), nil
		}
	case []any, Tuple:
		items, _ := asSeq(v)
		if i, ok := integer(key); ok {
			if i < 0 {
				i += int64(len(items))
			}
			if i < 0 || i >= int64(len(items)) {
				return Undefined{}, nil
			}
			return items[i], nil
		}
	case rangeVal:
		if i, ok := integer(key); ok {
			n := x.len()
			if i < 0 {
				i += n
			}
			if i < 0 || i >= n {
				return Undefined{}, nil
			}
			return x.start + i*x.step, nil
		}
	case *loopObj:
		if k, ok := key.(string); ok {
			if val, ok := x.attr(k); ok {
				return val, nil
			}
		}
		return Undefined{}, nil
	case nil:
		return Undefined{}, nil
	}
	if k, ok := key.(string); ok {
		return getAttrOnly(v, k), nil
	}
	return Undefined{}, nil
}

func getAttrOnly(v any, name string) any {
	if isMethod(v, name) {
		return boundMethod{recv: v, name: name}
	}
	return Undefined{Name: name}
}

func (ev *evaluator) slice(x *sliceExpr, sc *scope) (any, error) {
	v, err := ev.eval(x.x, sc)
	if err != nil {
		return nil, err
	}
	v = demark(v)
	var bounds [3]*int64
	for i, e := range []expr{x.lo, x.hi, x.step} {
		if e == nil {
			continue
		}
		b, err := ev.eval(e, sc)
		if err != nil {
			return nil, err
		}
		if b == nil {
			continue
		}
		n, ok := integer(b)
		if !ok {
			return nil, fmt.Errorf("slice indices must be integers")
		}
		bounds[i] = &n
	}
	var items []any
	var runes []rune
	length := 0
	switch s := v.(type) {
	case string:
		runes = []rune(s)
		length = len(runes)
	case []any:
		items, length = s, len(s)
	case Tuple:
		items, length = s, len(s)
	case rangeVal:
		all, err := ev.iterate(s)
		if err != nil {
			return nil, err
		}
		items, length = all, len(all)
	default:
		return nil, fmt.Errorf("'%s' object is not subscriptable", typeName(v))
	}
	idx := pySlice(length, bounds)
	if err := ev.step(int64(len(idx))); err != nil {
		return nil, err
	}
	if runes != nil || length == 0 {
		if _, isStr := v.(string); isStr {
			var b strings.Builder
			for _, i := range idx {
				b.WriteRune(runes[i])
			}
			return b.String(), nil
		}
	}
	out := make([]any, len(idx))
	for j, i := range idx {
		out[j] = items[i]
	}
	if _, ok := v.(Tuple); ok {
		return Tuple(out), nil
	}
	return out, nil
}

// pySlice is the indices of Python's seq[lo:hi:step].
func pySlice(n int, b [3]*int64) []int {
	step := int64(1)
	if b[2] != nil {
		step = *b[2]
	}
	if step == 0 {
		step = 1
	}
	ln := int64(n)
	clamp := func(p *int64, def int64) int64 {
		if p == nil {
			return def
		}
		i := *p
		if i < 0 {
			i += ln
			if i < 0 {
				if step < 0 {
					return -1
				}
				return 0
			}
		}
		if i >= ln {
			if step < 0 {
				return ln - 1
			}
			return ln
		}
		return i
	}
	var out []int
	if step > 0 {
		lo, hi := clamp(b[0], 0), clamp(b[1], ln)
		for i := lo; i < hi; i += step {
			out = append(out, int(i))
		}
	} else {
		lo, hi := clamp(b[0], ln-1), clamp(b[1], -1)
		for i := lo; i > hi; i += step {
			out = append(out, int(i))
		}
	}
	return out
}
