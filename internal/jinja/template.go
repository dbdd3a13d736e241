package jinja

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrBudget: rendering ran past its Budget (steps, output or depth).
var ErrBudget = errors.New("template budget exceeded")

// ErrRaised: the template called raise_exception.
var ErrRaised = errors.New("template raised an exception")

// Budget bounds one rendering. A zero field takes its default.
type Budget struct {
	// Steps bounds the work: every node, loop iteration, call and
	// filter counts one, and every item or byte a filter copies counts too.
	Steps int64
	// Output bounds the bytes of the result and of any one string the
	// template builds.
	Output int
	// Depth bounds nested macro calls and recursive loops.
	Depth int
}

// Default budget: far above what a real chat template needs for a
// conversation that fits a context window, far below what hurts.
const (
	DefaultSteps  = 20_000_000
	DefaultOutput = 32 << 20
	DefaultDepth  = 64
)

func (b Budget) withDefaults() Budget {
	if b.Steps <= 0 {
		b.Steps = DefaultSteps
	}
	if b.Output <= 0 {
		b.Output = DefaultOutput
	}
	if b.Depth <= 0 {
		b.Depth = DefaultDepth
	}
	return b
}

// Template is a compiled template; it is safe for concurrent use.
type Template struct {
	body []node
}

// Compile parses src.
func Compile(src string) (*Template, error) {
	segs, err := scan(src)
	if err != nil {
		return nil, err
	}
	p := &parser{segs: segs}
	body, _, err := p.parseBody()
	if err != nil {
		return nil, err
	}
	return &Template{body: body}, nil
}

// Options are what a rendering sees besides its variables.
type Options struct {
	Budget Budget
	// Now is strftime_now's clock (time.Now when nil).
	Now func() time.Time
}

// Render renders the template with vars (values as described in value.go;
// Go maps are converted with their keys sorted, so pass *Map for order).
func (t *Template) Render(vars map[string]any, opt Options) (string, error) {
	b := opt.Budget.withDefaults()
	ev := &evaluator{budget: b, steps: b.Steps, now: opt.Now}
	if ev.now == nil {
		ev.now = time.Now
	}
	root := &scope{vars: map[string]any{}}
	for k, v := range globals {
		root.vars[k] = v
	}
	top := &scope{vars: map[string]any{}, parent: root}
	for k, v := range vars {
		top.vars[k] = normalize(v)
	}
	var out strings.Builder
	err := ev.run(t.body, top, &out)
	if errors.Is(err, errLoopCtl) {
		err = fmt.Errorf("break or continue outside a loop")
	}
	if err != nil {
		return "", err
	}
	return out.String(), nil
}

// scope is a frame of variables.
type scope struct {
	vars   map[string]any
	parent *scope
}

func (s *scope) lookup(name string) (any, bool) {
	for c := s; c != nil; c = c.parent {
		if v, ok := c.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

var errLoopCtl = errors.New("loop control")

type loopSignal struct{ brk bool }

func (loopSignal) Error() string { return "loop control" }
func (loopSignal) Unwrap() error { return errLoopCtl }

// evaluator is one rendering's state.
type evaluator struct {
	budget Budget
	steps  int64
	depth  int
	now    func() time.Time
}

func (ev *evaluator) step(n int64) error {
	ev.steps -= n
	if ev.steps < 0 {
		return fmt.Errorf("%w: more than %d steps", ErrBudget, ev.budget.Steps)
	}
	return nil
}

func (ev *evaluator) checkSize(n int) error {
	if n > ev.budget.Output {
		return fmt.Errorf("%w: output larger than %d bytes", ErrBudget, ev.budget.Output)
	}
	return nil
}

// bytesPerStep is what building a string costs: every n bytes a string
// operation makes (concatenation, replace, join, indent, tojson, output)
// count one step, so the step budget also bounds the bytes a rendering
// allocates in all, not just the size of each string.
const bytesPerStep = 16

// produce accounts for a new string of n bytes.
func (ev *evaluator) produce(n int) error {
	if err := ev.checkSize(n); err != nil {
		return err
	}
	return ev.step(int64(n/bytesPerStep) + 1)
}

func (ev *evaluator) write(out *strings.Builder, s string) error {
	if err := ev.checkSize(out.Len() + len(s)); err != nil {
		return err
	}
	out.WriteString(s)
	return ev.step(int64(len(s)/bytesPerStep) + 1)
}

func (ev *evaluator) run(nodes []node, sc *scope, out *strings.Builder) error {
	for _, n := range nodes {
		if err := ev.step(1); err != nil {
			return err
		}
		if err := ev.exec(n, sc, out); err != nil {
			return err
		}
	}
	return nil
}

func (ev *evaluator) exec(n node, sc *scope, out *strings.Builder) error {
	switch n := n.(type) {
	case *textNode:
		return ev.write(out, n.text)
	case *outNode:
		v, err := ev.eval(n.x, sc)
		if err != nil {
			return err
		}
		return ev.write(out, str(v))
	case *ifNode:
		for i, c := range n.conds {
			v, err := ev.eval(c, sc)
			if err != nil {
				return err
			}
			if truthy(v) {
				return ev.run(n.bodies[i], sc, out)
			}
		}
		return ev.run(n.els, sc, out)
	case *forNode:
		return ev.forLoop(n, sc, out)
	case *setNode:
		return ev.set(n, sc)
	case *macroNode:
		sc.vars[n.name] = &macro{name: n.name, params: n.params, defaults: n.defaults, body: n.body, closure: sc}
		return nil
	case *callBlockNode:
		caller := &macro{name: "caller", params: n.params, defaults: n.defaults, body: n.body, closure: sc}
		fn, err := ev.eval(n.call.fn, sc)
		if err != nil {
			return err
		}
		args, kw, err := ev.args(n.call.args, n.call.kwargs, sc)
		if err != nil {
			return err
		}
		m, ok := fn.(*macro)
		if !ok {
			return fmt.Errorf("call block on a %s", typeName(fn))
		}
		v, err := ev.callMacro(m, args, kw, caller)
		if err != nil {
			return err
		}
		return ev.write(out, str(v))
	case *filterBlockNode:
		var b strings.Builder
		if err := ev.run(n.body, sc, &b); err != nil {
			return err
		}
		var v any = b.String()
		for _, f := range n.filters {
			var err error
			if v, err = ev.applyFilter(f, v, sc); err != nil {
				return err
			}
		}
		return ev.write(out, str(v))
	case *loopCtl:
		return loopSignal{brk: n.brk}
	}
	return fmt.Errorf("unknown node %T", n)
}

func (ev *evaluator) set(n *setNode, sc *scope) error {
	var v any
	if n.x != nil {
		var err error
		if v, err = ev.eval(n.x, sc); err != nil {
			return err
		}
	} else {
		var b strings.Builder
		if err := ev.run(n.body, sc, &b); err != nil {
			return err
		}
		v = b.String()
		for _, f := range n.filters {
			var err error
			if v, err = ev.applyFilter(f, v, sc); err != nil {
				return err
			}
		}
	}
	if n.attr != "" {
		obj, _ := sc.lookup(n.names[0])
		m, ok := obj.(*Map)
		if !ok || !m.ns {
			return fmt.Errorf("cannot assign attribute on non-namespace object")
		}
		m.Set(n.attr, v)
		return nil
	}
	if len(n.names) == 1 {
		sc.vars[n.names[0]] = v
		return nil
	}
	items, err := ev.iterate(v)
	if err != nil {
		return err
	}
	if len(items) != len(n.names) {
		return fmt.Errorf("cannot unpack %d values into %d names", len(items), len(n.names))
	}
	for i, nm := range n.names {
		sc.vars[nm] = items[i]
	}
	return nil
}

// loopObj is a for loop's loop variable.
type loopObj struct {
	items []any
	i     int
	depth int
	rec   func(v any) (any, error) // a recursive loop's loop(...)
}

func (l *loopObj) attr(name string) (any, bool) {
	n := int64(len(l.items))
	i := int64(l.i)
	switch name {
	case "index":
		return i + 1, true
	case "index0":
		return i, true
	case "revindex":
		return n - i, true
	case "revindex0":
		return n - i - 1, true
	case "first":
		return i == 0, true
	case "last":
		return i == n-1, true
	case "length":
		return n, true
	case "depth":
		return int64(l.depth + 1), true
	case "depth0":
		return int64(l.depth), true
	case "previtem":
		if i > 0 {
			return l.items[i-1], true
		}
		return Undefined{Name: "previtem"}, true
	case "nextitem":
		if i < n-1 {
			return l.items[i+1], true
		}
		return Undefined{Name: "nextitem"}, true
	case "cycle":
		return builtin(func(ev *evaluator, args []any, _ *Map) (any, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("no items for cycling given")
			}
			return args[l.i%len(args)], nil
		}), true
	}
	return nil, false
}

func (ev *evaluator) forLoop(n *forNode, sc *scope, out *strings.Builder) error {
	iterV, err := ev.eval(n.iter, sc)
	if err != nil {
		return err
	}
	var loopDepth int
	var run func(iterV any, depth int) (string, error)
	run = func(iterV any, depth int) (string, error) {
		var b strings.Builder
		if depth > 0 {
			ev.depth++
			defer func() { ev.depth-- }()
			if ev.depth > ev.budget.Depth {
				return "", fmt.Errorf("%w: recursion deeper than %d", ErrBudget, ev.budget.Depth)
			}
		}
		all, err := ev.iterate(iterV)
		if err != nil {
			return "", err
		}
		inner := &scope{vars: map[string]any{}, parent: sc}
		items := all
		if n.filter != nil {
			items = nil
			for _, it := range all {
				if err := ev.step(1); err != nil {
					return "", err
				}
				if err := bind(inner, n.targets, it); err != nil {
					return "", err
				}
				ok, err := ev.eval(n.filter, inner)
				if err != nil {
					return "", err
				}
				if truthy(ok) {
					items = append(items, it)
				}
			}
		}
		if len(items) == 0 {
			err := ev.run(n.els, sc, &b)
			return b.String(), err
		}
		lo := &loopObj{items: items, depth: depth}
		if n.recursive {
			lo.rec = func(v any) (any, error) { return run(v, depth+1) }
		}
		inner.vars["loop"] = lo
		for i, it := range items {
			if err := ev.step(1); err != nil {
				return "", err
			}
			lo.i = i
			if err := bind(inner, n.targets, it); err != nil {
				return "", err
			}
			err := ev.run(n.body, inner, &b)
			var sig loopSignal
			if errors.As(err, &sig) {
				if sig.brk {
					break
				}
				continue
			}
			if err != nil {
				return "", err
			}
			if err := ev.checkSize(b.Len() + out.Len()); err != nil {
				return "", err
			}
		}
		return b.String(), nil
	}
	s, err := run(iterV, loopDepth)
	if err != nil {
		return err
	}
	return ev.write(out, s)
}

func bind(sc *scope, targets []string, v any) error {
	if len(targets) == 1 {
		sc.vars[targets[0]] = v
		return nil
	}
	items, ok := asSeq(v)
	if !ok {
		if s, isStr := v.(string); isStr {
			for _, r := range s {
				items = append(items, string(r))
			}
		} else {
			return fmt.Errorf("cannot unpack a %s", typeName(v))
		}
	}
	if len(items) != len(targets) {
		return fmt.Errorf("cannot unpack %d values into %d names", len(items), len(targets))
	}
	for i, t := range targets {
		sc.vars[t] = items[i]
	}
	return nil
}

// iterate lists what a for loop over v sees.
func (ev *evaluator) iterate(v any) ([]any, error) {
	switch x := v.(type) {
	case []any:
		return x, nil
	case Tuple:
		return x, nil
	case Generator:
		return x, nil
	case Markup:
		return ev.iterate(string(x))
	case Undefined:
		return nil, nil
	case string:
		if err := ev.step(int64(len(x))); err != nil {
			return nil, err
		}
		out := make([]any, 0, len(x))
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	case *Map:
		out := make([]any, len(x.keys))
		for i, k := range x.keys {
			out[i] = keyValue(k)
		}
		return out, nil
	case rangeVal:
		n := x.len()
		if err := ev.step(n); err != nil {
			return nil, err
		}
		out := make([]any, 0, n)
		for i := int64(0); i < n; i++ {
			out = append(out, x.start+i*x.step)
		}
		return out, nil
	}
	return nil, fmt.Errorf("'%s' object is not iterable", typeName(v))
}

// macro is a {% macro %} (or a call block's caller).
type macro struct {
	name     string
	params   []string
	defaults []expr
	body     []node
	closure  *scope
}

func (ev *evaluator) callMacro(m *macro, args []any, kw *Map, caller *macro) (any, error) {
	ev.depth++
	defer func() { ev.depth-- }()
	if ev.depth > ev.budget.Depth {
		return nil, fmt.Errorf("%w: macro calls nested deeper than %d", ErrBudget, ev.budget.Depth)
	}
	sc := &scope{vars: map[string]any{}, parent: m.closure}
	if len(args) > len(m.params) {
		return nil, fmt.Errorf("macro '%s' takes not more than %d argument(s)", m.name, len(m.params))
	}
	for i, p := range m.params {
		switch {
		case i < len(args):
			sc.vars[p] = args[i]
		case kw != nil && has(kw, p):
			sc.vars[p], _ = kw.Get(p)
			kw.Delete(p)
		case m.defaults[i] != nil:
			v, err := ev.eval(m.defaults[i], sc)
			if err != nil {
				return nil, err
			}
			sc.vars[p] = v
		default:
			sc.vars[p] = Undefined{Name: p}
		}
	}
	if kw != nil && kw.Len() > 0 {
		return nil, fmt.Errorf("macro '%s' takes no keyword argument '%s'", m.name, kw.Keys()[0])
	}
	if caller != nil {
		sc.vars["caller"] = caller
	}
	var b strings.Builder
	err := ev.run(m.body, sc, &b)
	if errors.Is(err, errLoopCtl) {
		err = fmt.Errorf("break or continue outside a loop")
	}
	if err != nil {
		return nil, err
	}
	return b.String(), nil
}

func has(m *Map, k string) bool { _, ok := m.Get(k); return ok }
