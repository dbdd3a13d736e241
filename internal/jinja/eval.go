package jinja

import (
	"fmt"
	"math"
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

func (ev *evaluator) binary(op string, a, b any) (any, error) {
	if op == "+" {
		ma, aok := a.(Markup)
		mb, bok := b.(Markup)
		_, as := a.(string)
		_, bs := b.(string)
		switch {
		case aok && (bok || bs):
			s, err := ev.binary("+", string(ma), escapeMarkup(b))
			if err != nil {
				return nil, err
			}
			return Markup(s.(string)), nil
		case bok && as:
			s, err := ev.binary("+", escapeMarkup(a), string(mb))
			if err != nil {
				return nil, err
			}
			return Markup(s.(string)), nil
		}
	}
	a, b = demark(a), demark(b)
	switch op {
	case "~":
		sa, sb := str(a), str(b)
		if err := ev.produce(len(sa) + len(sb)); err != nil {
			return nil, err
		}
		return sa + sb, nil
	case "+":
		if x, ok := a.(string); ok {
			if y, ok := b.(string); ok {
				if err := ev.produce(len(x) + len(y)); err != nil {
					return nil, err
				}
				return x + y, nil
			}
		}
		if x, ok := asSeq(a); ok {
			if y, ok := asSeq(b); ok && typeName(a) == typeName(b) {
				if err := ev.step(int64(len(x) + len(y))); err != nil {
					return nil, err
				}
				out := append(append(make([]any, 0, len(x)+len(y)), x...), y...)
				if _, ok := a.(Tuple); ok {
					return Tuple(out), nil
				}
				return out, nil
			}
		}
	case "*":
		if s, ok := a.(string); ok {
			if n, ok := integer(b); ok {
				if n <= 0 {
					return "", nil
				}
				if n > int64(ev.budget.Output) || len(s)*int(n) > ev.budget.Output {
					return nil, fmt.Errorf("%w: output larger than %d bytes", ErrBudget, ev.budget.Output)
				}
				if err := ev.produce(len(s) * int(n)); err != nil {
					return nil, err
				}
				return strings.Repeat(s, int(n)), nil
			}
		}
		if l, ok := a.([]any); ok {
			if n, ok := integer(b); ok {
				if n <= 0 {
					return []any{}, nil
				}
				if err := ev.step(n * int64(len(l)+1)); err != nil {
					return nil, err
				}
				var out []any
				for range n {
					out = append(out, l...)
				}
				return out, nil
			}
		}
	}
	if ia, ok := integer(a); ok {
		if ib, ok := integer(b); ok {
			switch op {
			case "+":
				return ia + ib, nil
			case "-":
				return ia - ib, nil
			case "*":
				return ia * ib, nil
			case "/":
				if ib == 0 {
					return nil, fmt.Errorf("division by zero")
				}
				return float64(ia) / float64(ib), nil
			case "//":
				if ib == 0 {
					return nil, fmt.Errorf("integer division or modulo by zero")
				}
				q := ia / ib
				if (ia%ib != 0) && ((ia < 0) != (ib < 0)) {
					q--
				}
				return q, nil
			case "%":
				if ib == 0 {
					return nil, fmt.Errorf("integer division or modulo by zero")
				}
				m := ia % ib
				if m != 0 && ((m < 0) != (ib < 0)) {
					m += ib
				}
				return m, nil
			case "**":
				if ib >= 0 && ib < 64 {
					r := int64(1)
					for range ib {
						r *= ia
					}
					return r, nil
				}
				return math.Pow(float64(ia), float64(ib)), nil
			}
		}
	}
	fa, ok1 := number(a)
	fb, ok2 := number(b)
	if ok1 && ok2 {
		switch op {
		case "+":
			return fa + fb, nil
		case "-":
			return fa - fb, nil
		case "*":
			return fa * fb, nil
		case "/":
			if fb == 0 {
				return nil, fmt.Errorf("float division by zero")
			}
			return fa / fb, nil
		case "//":
			if fb == 0 {
				return nil, fmt.Errorf("float floor division by zero")
			}
			return math.Floor(fa / fb), nil
		case "%":
			if fb == 0 {
				return nil, fmt.Errorf("float modulo")
			}
			m := math.Mod(fa, fb)
			if m != 0 && ((m < 0) != (fb < 0)) {
				m += fb
			}
			return m, nil
		case "**":
			return math.Pow(fa, fb), nil
		}
	}
	if op == "%" {
		if s, ok := a.(string); ok {
			return percentFormat(s, b)
		}
	}
	return nil, fmt.Errorf("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(a), typeName(b))
}

// percentFormat is Python's "%s" % x for %s, %d and %%.
func percentFormat(f string, arg any) (string, error) {
	args, ok := arg.(Tuple)
	if !ok {
		args = Tuple{arg}
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		if f[i] == '%' {
			b.WriteByte('%')
			continue
		}
		if n >= len(args) {
			return "", fmt.Errorf("not enough arguments for format string")
		}
		switch f[i] {
		case 's':
			b.WriteString(str(args[n]))
		case 'd', 'i':
			x, ok := number(args[n])
			if !ok {
				return "", fmt.Errorf("%%d format: a real number is required")
			}
			fmt.Fprintf(&b, "%d", int64(x))
		default:
			return "", fmt.Errorf("unsupported format character %q", f[i])
		}
		n++
	}
	if n < len(args) {
		return "", fmt.Errorf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

// escapeMarkup is what markupsafe adds to a Markup: a Markup as it is, a
// string escaped.
func escapeMarkup(v any) string {
	if m, ok := v.(Markup); ok {
		return string(m)
	}
	return htmlEscape(str(v))
}

func cmpOp(op string, a, b any) (bool, error) {
	a, b = demark(a), demark(b)
	switch op {
	case "==":
		return equal(a, b), nil
	case "!=":
		return !equal(a, b), nil
	case "in", "notin":
		ok, err := contains(b, a)
		if op == "notin" {
			ok = !ok
		}
		return ok, err
	}
	c, err := compare(a, b)
	if err != nil {
		return false, err
	}
	switch op {
	case "<":
		return c < 0, nil
	case ">":
		return c > 0, nil
	case "<=":
		return c <= 0, nil
	}
	return c >= 0, nil
}

// contains is Python's x in container.
func contains(container, x any) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := x.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", typeName(x))
		}
		return strings.Contains(c, s), nil
	case []any, Tuple, Generator:
		items, _ := asSeq(c)
		if g, ok := c.(Generator); ok {
			items = g
		}
		for _, it := range items {
			if equal(it, x) {
				return true, nil
			}
		}
		return false, nil
	case *Map:
		s, ok := mapKey(x)
		return ok && has(c, s), nil
	case Undefined:
		return false, nil
	case rangeVal:
		i, ok := integer(x)
		if !ok {
			return false, nil
		}
		n := c.len()
		if n == 0 || (i-c.start)%c.step != 0 {
			return false, nil
		}
		k := (i - c.start) / c.step
		return k >= 0 && k < n, nil
	}
	return false, fmt.Errorf("argument of type '%s' is not iterable", typeName(container))
}
