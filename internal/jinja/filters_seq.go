package jinja

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// The filters over sequences: sort, unique, min, max, sum, round, select
// and reject, map, batch.

func sortKey(v any, attr any, cs bool) (any, error) {
	if attr != nil {
		var err error
		for _, part := range strings.Split(str(attr), ".") {
			if v, err = getItem(v, part); err != nil {
				return nil, err
			}
		}
	}
	if !cs {
		v = foldCase(v)
	}
	return v, nil
}

func fSort(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	items, err := ev.toList(v)
	if err != nil {
		return nil, err
	}
	rev := truthy(arg(args, kw, 0, "reverse"))
	cs := truthy(arg(args, kw, 1, "case_sensitive"))
	attr := arg(args, kw, 2, "attribute")
	var sortErr error
	sort.SliceStable(items, func(i, j int) bool {
		a, err1 := sortKey(items[i], attr, cs)
		b, err2 := sortKey(items[j], attr, cs)
		if err1 != nil || err2 != nil {
			sortErr = fmt.Errorf("sort: %v%v", err1, err2)
			return false
		}
		c, err := compare(a, b)
		if err != nil {
			sortErr = err
		}
		if rev {
			return c > 0
		}
		return c < 0
	})
	return items, sortErr
}

func fUnique(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	items, err := ev.iterate(v)
	if err != nil {
		return nil, err
	}
	cs := truthy(arg(args, kw, 0, "case_sensitive"))
	attr := arg(args, kw, 1, "attribute")
	var out, seen []any
	for _, it := range items {
		k, err := sortKey(it, attr, cs)
		if err != nil {
			return nil, err
		}
		dup := false
		for _, s := range seen {
			if equal(s, k) {
				dup = true
				break
			}
		}
		if err := ev.step(int64(len(seen))); err != nil {
			return nil, err
		}
		if !dup {
			seen = append(seen, k)
			out = append(out, it)
		}
	}
	return Generator(out), nil
}

func minMax(ev *evaluator, v any, kw *Map, sign int) (any, error) {
	items, err := ev.iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return Undefined{}, nil
	}
	cs := truthy(arg(nil, kw, -1, "case_sensitive"))
	attr := arg(nil, kw, -1, "attribute")
	best := items[0]
	bk, err := sortKey(best, attr, cs)
	if err != nil {
		return nil, err
	}
	for _, it := range items[1:] {
		k, err := sortKey(it, attr, cs)
		if err != nil {
			return nil, err
		}
		c, err := compare(k, bk)
		if err != nil {
			return nil, err
		}
		if c*sign > 0 {
			best, bk = it, k
		}
	}
	return best, nil
}

func fSum(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	items, err := ev.iterate(v)
	if err != nil {
		return nil, err
	}
	attr := arg(args, kw, 0, "attribute")
	var total any = int64(0)
	if s := arg(args, kw, 1, "start"); s != nil {
		total = s
	}
	for _, it := range items {
		if attr != nil {
			if it, err = sortKey(it, attr, true); err != nil {
				return nil, err
			}
		}
		if total, err = ev.binary("+", total, it); err != nil {
			return nil, err
		}
	}
	return total, nil
}

func fRound(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	f, ok := number(v)
	if !ok {
		return nil, fmt.Errorf("round of a %s", typeName(v))
	}
	prec := int64(0)
	if p := arg(args, kw, 0, "precision"); p != nil {
		prec, _ = integer(p)
	}
	method := "common"
	if m := arg(args, kw, 1, "method"); m != nil {
		method = str(m)
	}
	e := math.Pow(10, float64(prec))
	switch method {
	case "floor":
		return math.Floor(f*e) / e, nil
	case "ceil":
		return math.Ceil(f*e) / e, nil
	}
	return math.Round(f*e) / e, nil
}

func selectItems(ev *evaluator, v any, args []any, reject, byAttr bool) (any, error) {
	if !truthy(v) {
		return Generator{}, nil
	}
	items, err := ev.iterate(v)
	if err != nil {
		return nil, err
	}
	var attr any
	if byAttr {
		if len(args) == 0 {
			return nil, fmt.Errorf("missing attribute")
		}
		attr, args = args[0], args[1:]
	}
	testName := ""
	if len(args) > 0 {
		testName, args = str(args[0]), args[1:]
	}
	out := []any{}
	for _, it := range items {
		if err := ev.step(1); err != nil {
			return nil, err
		}
		x := it
		if attr != nil {
			if x, err = sortKey(it, attr, true); err != nil {
				return nil, err
			}
		}
		var ok bool
		if testName == "" {
			ok = truthy(x)
		} else if ok, err = ev.test(testName, x, args); err != nil {
			return nil, err
		}
		if ok != reject {
			out = append(out, it)
		}
	}
	return Generator(out), nil
}

func fMap(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	items, err := ev.iterate(v)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(items))
	if attr := arg(nil, kw, -1, "attribute"); attr != nil {
		def := arg(nil, kw, -1, "default")
		for _, it := range items {
			x, err := sortKey(it, attr, true)
			if err != nil {
				return nil, err
			}
			if _, undef := x.(Undefined); undef && def != nil {
				x = def
			}
			out = append(out, x)
		}
		return Generator(out), ev.step(int64(len(items)))
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("map needs a filter name or attribute")
	}
	name := str(args[0])
	fn := filters[name]
	if fn == nil {
		return nil, fmt.Errorf("no filter named '%s'", name)
	}
	for _, it := range items {
		if err := ev.step(1); err != nil {
			return nil, err
		}
		x, err := fn(ev, it, args[1:], kw)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return Generator(out), nil
}

func fBatch(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	items, err := ev.iterate(v)
	if err != nil {
		return nil, err
	}
	n, _ := integer(arg(args, kw, 0, "linecount"))
	if n <= 0 {
		return nil, fmt.Errorf("batch size must be positive")
	}
	var out []any
	for i := 0; i < len(items); i += int(n) {
		out = append(out, append([]any(nil), items[i:min(i+int(n), len(items))]...))
	}
	return Generator(out), nil
}
