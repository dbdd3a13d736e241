package jinja

import (
	"fmt"
	"strings"
)

var tests map[string]func(v any, args []any) (bool, error)

func init() {
	tests = map[string]func(v any, args []any) (bool, error){
		"defined":   func(v any, _ []any) (bool, error) { _, u := v.(Undefined); return !u, nil },
		"undefined": func(v any, _ []any) (bool, error) { _, u := v.(Undefined); return u, nil },
		"none":      func(v any, _ []any) (bool, error) { return v == nil, nil },
		"string":    func(v any, _ []any) (bool, error) { _, ok := v.(string); return ok, nil },
		"mapping":   func(v any, _ []any) (bool, error) { _, ok := v.(*Map); return ok, nil },
		"boolean":   func(v any, _ []any) (bool, error) { _, ok := v.(bool); return ok, nil },
		"true":      func(v any, _ []any) (bool, error) { return v == true, nil },
		"false":     func(v any, _ []any) (bool, error) { return v == false, nil },
		"integer":   func(v any, _ []any) (bool, error) { _, ok := v.(int64); return ok, nil },
		"float":     func(v any, _ []any) (bool, error) { _, ok := v.(float64); return ok, nil },
		"number": func(v any, _ []any) (bool, error) {
			_, ok := number(v)
			return ok, nil
		},
		"sequence": func(v any, _ []any) (bool, error) {
			switch v.(type) {
			case string, []any, Tuple, *Map, rangeVal:
				return true, nil
			}
			return false, nil
		},
		"iterable": func(v any, _ []any) (bool, error) {
			switch v.(type) {
			case string, []any, Tuple, *Map, rangeVal, Undefined:
				return true, nil
			}
			return false, nil
		},
		"callable": func(v any, _ []any) (bool, error) {
			switch v.(type) {
			case builtin, *macro, boundMethod:
				return true, nil
			}
			return false, nil
		},
		"odd": func(v any, _ []any) (bool, error) {
			n, ok := integer(v)
			return ok && n%2 != 0, nil
		},
		"even": func(v any, _ []any) (bool, error) {
			n, ok := integer(v)
			return ok && n%2 == 0, nil
		},
		"divisibleby": func(v any, a []any) (bool, error) {
			n, ok1 := integer(v)
			if len(a) != 1 {
				return false, fmt.Errorf("divisibleby takes one argument")
			}
			d, ok2 := integer(a[0])
			return ok1 && ok2 && d != 0 && n%d == 0, nil
		},
		"lower": func(v any, _ []any) (bool, error) { s := str(v); return s == strings.ToLower(s), nil },
		"upper": func(v any, _ []any) (bool, error) { s := str(v); return s == strings.ToUpper(s), nil },
		"in": func(v any, a []any) (bool, error) {
			if len(a) != 1 {
				return false, fmt.Errorf("in takes one argument")
			}
			return contains(a[0], v)
		},
		"sameas": func(v any, a []any) (bool, error) {
			if len(a) != 1 {
				return false, fmt.Errorf("sameas takes one argument")
			}
			switch v.(type) {
			case nil, bool:
				return v == a[0], nil
			}
			return false, nil
		},
	}
	for _, op := range []struct{ names []string }{{[]string{"eq", "equalto", "=="}}, {[]string{"ne", "!="}}, {[]string{"lt", "lessthan", "<"}}, {[]string{"gt", "greaterthan", ">"}}, {[]string{"le", "<="}}, {[]string{"ge", ">="}}} {
		sym := op.names[len(op.names)-1]
		for _, n := range op.names {
			tests[n] = func(v any, a []any) (bool, error) {
				if len(a) != 1 {
					return false, fmt.Errorf("%s takes one argument", n)
				}
				return cmpOp(sym, v, a[0])
			}
		}
	}
}

func (ev *evaluator) test(name string, v any, args []any) (bool, error) {
	v = demark(v)
	t := tests[name]
	if t == nil {
		return false, fmt.Errorf("no test named '%s'", name)
	}
	return t(v, args)
}
