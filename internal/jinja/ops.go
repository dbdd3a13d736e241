package jinja

import (
	"fmt"
	"math"
	"strings"
)

// binary is a binary operator of Python on two values.
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
