package jinja

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// filterFn is a filter: v | name(args, kw).
type filterFn func(ev *evaluator, v any, args []any, kw *Map) (any, error)

var filters map[string]filterFn

func init() {
	filters = map[string]filterFn{
		"tojson":     fTojson,
		"length":     fLength,
		"count":      fLength,
		"default":    fDefault,
		"d":          fDefault,
		"trim":       fTrim,
		"string":     func(ev *evaluator, v any, _ []any, _ *Map) (any, error) { return str(v), nil },
		"safe":       func(ev *evaluator, v any, _ []any, _ *Map) (any, error) { return Markup(str(v)), nil },
		"upper":      func(ev *evaluator, v any, _ []any, _ *Map) (any, error) { return strings.ToUpper(str(v)), nil },
		"lower":      func(ev *evaluator, v any, _ []any, _ *Map) (any, error) { return strings.ToLower(str(v)), nil },
		"capitalize": func(ev *evaluator, v any, _ []any, _ *Map) (any, error) { return capitalize(str(v)), nil },
		"title":      func(ev *evaluator, v any, _ []any, _ *Map) (any, error) { return title(str(v)), nil },
		"escape":     fEscape,
		"e":          fEscape,
		"join":       fJoin,
		"items":      fItems,
		"dictsort":   fDictsort,
		"list":       func(ev *evaluator, v any, _ []any, _ *Map) (any, error) { return ev.toList(v) },
		"replace":    fReplace,
		"indent":     fIndent,
		"first":      fFirst,
		"last":       fLast,
		"reverse":    fReverse,
		"int":        fInt,
		"float":      fFloat,
		"abs":        fAbs,
		"sort":       fSort,
		"unique":     fUnique,
		"min":        func(ev *evaluator, v any, a []any, kw *Map) (any, error) { return minMax(ev, v, kw, -1) },
		"max":        func(ev *evaluator, v any, a []any, kw *Map) (any, error) { return minMax(ev, v, kw, 1) },
		"sum":        fSum,
		"round":      fRound,
		"wordcount": func(ev *evaluator, v any, _ []any, _ *Map) (any, error) {
			return int64(len(strings.Fields(str(v)))), nil
		},
		"select":     func(ev *evaluator, v any, a []any, kw *Map) (any, error) { return selectItems(ev, v, a, false, false) },
		"reject":     func(ev *evaluator, v any, a []any, kw *Map) (any, error) { return selectItems(ev, v, a, true, false) },
		"selectattr": func(ev *evaluator, v any, a []any, kw *Map) (any, error) { return selectItems(ev, v, a, false, true) },
		"rejectattr": func(ev *evaluator, v any, a []any, kw *Map) (any, error) { return selectItems(ev, v, a, true, true) },
		"map":        fMap,
		"batch":      fBatch,
		"format":     fFormat,
		"center": func(ev *evaluator, v any, a []any, kw *Map) (any, error) {
			s := str(v)
			w := int64(80)
			if x := arg(a, kw, 0, "width"); x != nil {
				w, _ = integer(x)
			}
			n := int(w) - len([]rune(s))
			if n <= 0 {
				return s, nil
			}
			left := n / 2
			if n%2 == 1 && int(w)%2 == 1 {
				left++
			}
			return strings.Repeat(" ", left) + s + strings.Repeat(" ", n-left), nil
		},
	}
}

// arg is positional argument i or keyword name (nil when absent).
func arg(args []any, kw *Map, i int, name string) any {
	if i >= 0 && i < len(args) {
		return args[i]
	}
	if kw != nil {
		if v, ok := kw.Get(name); ok {
			return v
		}
	}
	return nil
}

func (ev *evaluator) applyFilter(f *filterExpr, v any, sc *scope) (any, error) {
	if f.name != "safe" && f.name != "escape" && f.name != "e" {
		v = demark(v)
	}
	fn := filters[f.name]
	if fn == nil {
		return nil, fmt.Errorf("no filter named '%s'", f.name)
	}
	args, kw, err := ev.args(f.args, f.kwargs, sc)
	if err != nil {
		return nil, err
	}
	if err := ev.step(1); err != nil {
		return nil, err
	}
	return fn(ev, v, args, kw)
}

func fLength(ev *evaluator, v any, _ []any, _ *Map) (any, error) {
	switch x := v.(type) {
	case string:
		return int64(len([]rune(x))), nil
	case []any:
		return int64(len(x)), nil
	case Tuple:
		return int64(len(x)), nil
	case *Map:
		return int64(x.Len()), nil
	case Undefined:
		return int64(0), nil
	case rangeVal:
		return x.len(), nil
	}
	return nil, fmt.Errorf("object of type '%s' has no len()", typeName(v))
}

func fDefault(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	def := arg(args, kw, 0, "default_value")
	if def == nil && len(args) == 0 {
		def = ""
	}
	boolean := truthy(arg(args, kw, 1, "boolean"))
	if _, undef := v.(Undefined); undef || (boolean && !truthy(v)) {
		return def, nil
	}
	return v, nil
}

func pyStrip(s, chars string, left, right bool) string {
	if chars == "" {
		if left {
			s = strings.TrimLeftFunc(s, unicode.IsSpace)
		}
		if right {
			s = strings.TrimRightFunc(s, unicode.IsSpace)
		}
		return s
	}
	if left {
		s = strings.TrimLeft(s, chars)
	}
	if right {
		s = strings.TrimRight(s, chars)
	}
	return s
}

func fTrim(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	chars := ""
	if c := arg(args, kw, 0, "chars"); c != nil {
		chars = str(c)
	}
	return pyStrip(str(v), chars, true, true), nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	r := []rune(strings.ToLower(s))
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

func title(s string) string {
	var b strings.Builder
	prev := false
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' {
			if prev {
				b.WriteRune(unicode.ToLower(r))
			} else {
				b.WriteRune(unicode.ToUpper(r))
			}
			prev = true
		} else {
			b.WriteRune(r)
			prev = false
		}
	}
	return b.String()
}

func fEscape(ev *evaluator, v any, _ []any, _ *Map) (any, error) {
	if m, ok := v.(Markup); ok {
		return m, nil
	}
	return Markup(htmlEscape(str(v))), nil
}

func htmlEscape(s string) string {
	return html.EscapeString(s)
}

func (ev *evaluator) toList(v any) ([]any, error) {
	items, err := ev.iterate(v)
	if err != nil {
		return nil, err
	}
	if err := ev.step(int64(len(items))); err != nil {
		return nil, err
	}
	return append([]any(nil), items...), nil
}

func fJoin(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	sep := ""
	if s := arg(args, kw, 0, "d"); s != nil {
		sep = str(s)
	}
	items, err := ev.iterate(v)
	if err != nil {
		return nil, err
	}
	attr := arg(nil, kw, -1, "attribute")
	if attr == nil && len(args) > 1 {
		attr = args[1]
	}
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteString(sep)
		}
		if attr != nil {
			var err error
			if it, err = getItem(it, attr); err != nil {
				return nil, err
			}
		}
		b.WriteString(str(it))
		if err := ev.checkSize(b.Len()); err != nil {
			return nil, err
		}
	}
	return b.String(), ev.produce(b.Len())
}

func fItems(ev *evaluator, v any, _ []any, _ *Map) (any, error) {
	switch m := v.(type) {
	case Undefined:
		return []any{}, nil
	case *Map:
		out := make([]any, m.Len())
		for i, k := range m.keys {
			out[i] = Tuple{keyValue(k), m.vals[k]}
		}
		return Generator(out), ev.step(int64(len(out)))
	}
	return nil, fmt.Errorf("can only get item pairs from a mapping")
}

func fDictsort(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	m, ok := v.(*Map)
	if !ok {
		return nil, fmt.Errorf("dictsort of a %s", typeName(v))
	}
	cs := truthy(arg(args, kw, 0, "case_sensitive"))
	byValue := str(arg(args, kw, 1, "by")) == "value"
	rev := truthy(arg(args, kw, 2, "reverse"))
	out := make([]any, m.Len())
	for i, k := range m.keys {
		out[i] = Tuple{keyValue(k), m.vals[k]}
	}
	var sortErr error
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].(Tuple), out[j].(Tuple)
		x, y := a[0], b[0]
		if byValue {
			x, y = a[1], b[1]
		}
		if !cs {
			x, y = foldCase(x), foldCase(y)
		}
		c, err := compare(x, y)
		if err != nil {
			sortErr = err
		}
		if rev {
			return c > 0
		}
		return c < 0
	})
	return out, sortErr
}

func foldCase(v any) any {
	if s, ok := v.(string); ok {
		return strings.ToLower(s)
	}
	return v
}

func fReplace(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	if len(args) < 2 {
		return nil, fmt.Errorf("replace takes old and new")
	}
	n := -1
	if c := arg(args, kw, 2, "count"); c != nil {
		x, _ := integer(c)
		n = int(x)
	}
	return ev.replace(str(v), str(args[0]), str(args[1]), n)
}

func (ev *evaluator) replace(s, old, nw string, n int) (any, error) {
	count := strings.Count(s, old)
	if old == "" {
		count = len([]rune(s)) + 1
	}
	if n >= 0 && n < count {
		count = n
	}
	if err := ev.produce(len(s) + count*(len(nw)-len(old))); err != nil {
		return nil, err
	}
	return strings.Replace(s, old, nw, n), nil
}

func fIndent(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	ind := "    "
	if w := arg(args, kw, 0, "width"); w != nil {
		if s, ok := w.(string); ok {
			ind = s
		} else if n, ok := integer(w); ok {
			if n > 1024 {
				return nil, fmt.Errorf("indent width %d too large", n)
			}
			ind = strings.Repeat(" ", int(max(n, 0)))
		}
	}
	first := truthy(arg(args, kw, 1, "first"))
	blank := truthy(arg(args, kw, 2, "blank"))
	s := str(v) + "\n"
	lines := splitLines(s)
	if err := ev.produce(len(s) + len(lines)*len(ind) + len(ind)); err != nil {
		return nil, err
	}
	var rv string
	if blank {
		rv = strings.Join(lines, "\n"+ind)
	} else {
		var b strings.Builder
		b.Grow(len(s) + len(lines)*len(ind))
		b.WriteString(lines[0])
		for _, l := range lines[1:] {
			b.WriteString("\n")
			if l != "" {
				b.WriteString(ind)
			}
			b.WriteString(l)
		}
		rv = b.String()
	}
	if first {
		rv = ind + rv
	}
	if err := ev.checkSize(len(rv)); err != nil {
		return nil, err
	}
	return rv, ev.step(int64(len(lines)))
}

// splitLines is Python's str.splitlines() for \n, \r\n and \r.
func splitLines(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	if out == nil {
		out = []string{""}
	}
	return out
}

func fFirst(ev *evaluator, v any, _ []any, _ *Map) (any, error) {
	items, err := ev.iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return Undefined{}, nil
	}
	return items[0], nil
}

func fLast(ev *evaluator, v any, _ []any, _ *Map) (any, error) {
	items, err := ev.iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return Undefined{}, nil
	}
	return items[len(items)-1], nil
}

func fReverse(ev *evaluator, v any, _ []any, _ *Map) (any, error) {
	if s, ok := v.(string); ok {
		r := []rune(s)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		return string(r), nil
	}
	items, err := ev.toList(v)
	if err != nil {
		return nil, err
	}
	for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
		items[i], items[j] = items[j], items[i]
	}
	return Generator(items), nil
}

func fInt(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	def := arg(args, kw, 0, "default")
	if def == nil {
		def = int64(0)
	}
	switch x := v.(type) {
	case int64:
		return x, nil
	case bool:
		n, _ := integer(x)
		return n, nil
	case float64:
		return int64(x), nil
	case string:
		s := strings.TrimSpace(x)
		if n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64); err == nil {
			return n, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return int64(f), nil
		}
	}
	return def, nil
}

func fFloat(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	def := arg(args, kw, 0, "default")
	if def == nil {
		def = 0.0
	}
	if f, ok := number(v); ok {
		return f, nil
	}
	if s, ok := v.(string); ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			return f, nil
		}
	}
	return def, nil
}

func fAbs(ev *evaluator, v any, _ []any, _ *Map) (any, error) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return -x, nil
		}
		return x, nil
	case float64:
		return math.Abs(x), nil
	}
	return nil, fmt.Errorf("bad operand type for abs(): '%s'", typeName(v))
}

func fFormat(ev *evaluator, v any, args []any, kw *Map) (any, error) {
	return percentFormat(str(v), Tuple(args))
}
