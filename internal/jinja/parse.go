package jinja

import (
	"fmt"
	"strings"
)

// maxNesting bounds how deeply a template's expressions and blocks nest, so
// parsing a hostile one cannot exhaust the stack.
const maxNesting = 200

// Expressions.
type (
	expr     interface{}
	litExpr  struct{ v any }
	nameExpr struct{ name string }
	attrExpr struct {
		x    expr
		name string
	}
	itemExpr  struct{ x, key expr }
	sliceExpr struct{ x, lo, hi, step expr }
	callExpr  struct {
		fn     expr
		args   []expr
		kwargs []kwarg
	}
	kwarg struct {
		name string
		x    expr
	}
	filterExpr struct {
		x      expr // nil inside a {% filter %} block
		name   string
		args   []expr
		kwargs []kwarg
	}
	testExpr struct {
		x      expr
		name   string
		args   []expr
		negate bool
	}
	unaryExpr struct {
		op string
		x  expr
	}
	binExpr struct {
		op   string
		a, b expr
	}
	cmpExpr struct {
		first expr
		ops   []string
		rest  []expr
	}
	condExpr struct{ cond, a, b expr }
	listExpr struct {
		items []expr
		tuple bool
	}
	dictExpr struct{ keys, vals []expr }
)

// Statements.
type (
	node     interface{}
	textNode struct{ text string }
	outNode  struct{ x expr }
	ifNode   struct {
		conds  []expr
		bodies [][]node
		els    []node
	}
	forNode struct {
		targets   []string
		iter      expr
		filter    expr
		body, els []node
		recursive bool
	}
	setNode struct {
		names   []string // assignment targets (one, or a tuple)
		attr    string   // ns.attr = ...: names[0] is the namespace
		x       expr     // nil for a block set
		body    []node
		filters []*filterExpr
	}
	macroNode struct {
		name     string
		params   []string
		defaults []expr // per param, nil when none
		body     []node
	}
	callBlockNode struct {
		call     *callExpr
		params   []string
		defaults []expr
		body     []node
	}
	filterBlockNode struct {
		filters []*filterExpr
		body    []node
	}
	loopCtl struct{ brk bool }
)

// parser builds the tree from the segments.
type parser struct {
	segs  []segment
	i     int
	depth int
	// expression state
	toks []token
	j    int
	line int
}

func (p *parser) errf(format string, a ...any) error {
	return fmt.Errorf("line %d: %s", p.line, fmt.Sprintf(format, a...))
}

// parseBody parses nodes until a block tag whose first word is in ends; it
// returns that word ("" at the end of the template).
func (p *parser) parseBody(ends ...string) ([]node, string, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxNesting {
		return nil, "", p.errf("blocks nested deeper than %d", maxNesting)
	}
	var out []node
	for p.i < len(p.segs) {
		s := p.segs[p.i]
		p.i++
		p.line = s.line
		switch s.kind {
		case segText:
			out = append(out, &textNode{s.text})
		case segVar:
			if err := p.start(s.text); err != nil {
				return nil, "", err
			}
			x, err := p.expression()
			if err != nil {
				return nil, "", err
			}
			if err := p.end(); err != nil {
				return nil, "", err
			}
			out = append(out, &outNode{x})
		case segBlock:
			if err := p.start(s.text); err != nil {
				return nil, "", err
			}
			word := p.name()
			for _, e := range ends {
				if word == e {
					return out, word, nil
				}
			}
			n, err := p.statement(word)
			if err != nil {
				return nil, "", err
			}
			if n != nil {
				out = append(out, n)
			}
		}
	}
	if len(ends) > 0 {
		return nil, "", p.errf("unexpected end of template, expected %s", strings.Join(ends, " or "))
	}
	return out, "", nil
}

func (p *parser) start(s string) error {
	toks, err := lexExpr(s)
	if err != nil {
		return p.errf("%v", err)
	}
	p.toks, p.j = toks, 0
	return nil
}

func (p *parser) peek() token {
	if p.j < len(p.toks) {
		return p.toks[p.j]
	}
	return token{}
}

func (p *parser) next() token {
	t := p.peek()
	if p.j < len(p.toks) {
		p.j++
	}
	return t
}

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tokOp && t.text == op
}

func (p *parser) isName(n string) bool {
	t := p.peek()
	return t.kind == tokName && t.text == n
}

func (p *parser) accept(op string) bool {
	if p.isOp(op) {
		p.j++
		return true
	}
	return false
}

func (p *parser) expect(op string) error {
	if !p.accept(op) {
		return p.errf("expected %q, got %q", op, p.peek().text)
	}
	return nil
}

func (p *parser) name() string {
	t := p.peek()
	if t.kind != tokName {
		return ""
	}
	p.j++
	return t.text
}

func (p *parser) end() error {
	if p.j != len(p.toks) {
		return p.errf("unexpected %q", p.peek().text)
	}
	return nil
}

func (p *parser) statement(word string) (node, error) {
	switch word {
	case "if":
		return p.parseIf()
	case "for":
		return p.parseFor()
	case "set":
		return p.parseSet()
	case "macro":
		return p.parseMacro()
	case "call":
		return p.parseCallBlock()
	case "filter":
		fs, err := p.filterChain()
		if err != nil {
			return nil, err
		}
		body, _, err := p.parseBody("endfilter")
		if err != nil {
			return nil, err
		}
		return &filterBlockNode{filters: fs, body: body}, nil
	case "break", "continue":
		return &loopCtl{brk: word == "break"}, p.end()
	case "generation":
		if err := p.end(); err != nil {
			return nil, err
		}
		body, _, err := p.parseBody("endgeneration")
		if err != nil {
			return nil, err
		}
		return &filterBlockNode{body: body}, nil
	}
	return nil, p.errf("unknown tag %q", word)
}

func (p *parser) parseIf() (node, error) {
	n := &ifNode{}
	for {
		c, err := p.expression()
		if err != nil {
			return nil, err
		}
		if err := p.end(); err != nil {
			return nil, err
		}
		body, end, err := p.parseBody("elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds, n.bodies = append(n.conds, c), append(n.bodies, body)
		switch end {
		case "elif":
			continue
		case "else":
			if err := p.end(); err != nil {
				return nil, err
			}
			n.els, _, err = p.parseBody("endif")
			if err != nil {
				return nil, err
			}
		}
		return n, nil
	}
}

func (p *parser) parseFor() (node, error) {
	n := &forNode{}
	for {
		t := p.name()
		if t == "" {
			return nil, p.errf("expected a loop variable")
		}
		n.targets = append(n.targets, t)
		if !p.accept(",") {
			break
		}
	}
	if p.name() != "in" {
		return nil, p.errf("expected 'in'")
	}
	var err error
	if n.iter, err = p.orExpr(); err != nil {
		return nil, err
	}
	if p.isName("if") {
		p.j++
		if n.filter, err = p.orExpr(); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		p.j++
		n.recursive = true
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	body, end, err := p.parseBody("else", "endfor")
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if n.els, _, err = p.parseBody("endfor"); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (p *parser) parseSet() (node, error) {
	n := &setNode{}
	first := p.name()
	if first == "" {
		return nil, p.errf("expected a name after set")
	}
	n.names = []string{first}
	if p.accept(".") {
		if n.attr = p.name(); n.attr == "" {
			return nil, p.errf("expected an attribute name")
		}
	} else {
		for p.accept(",") {
			nm := p.name()
			if nm == "" {
				return nil, p.errf("expected a name")
			}
			n.names = append(n.names, nm)
		}
	}
	if p.accept("=") {
		x, err := p.tupleOrExpr()
		if err != nil {
			return nil, err
		}
		n.x = x
		return n, p.end()
	}
	if n.attr != "" || len(n.names) > 1 {
		return nil, p.errf("expected '='")
	}
	if p.isOp("|") {
		fs, err := p.filterChain()
		if err != nil {
			return nil, err
		}
		n.filters = fs
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	body, _, err := p.parseBody("endset")
	if err != nil {
		return nil, err
	}
	n.body = body
	return n, nil
}

// filterChain parses "[|] f(args) | g" (a filter block's or set block's).
func (p *parser) filterChain() ([]*filterExpr, error) {
	var fs []*filterExpr
	p.accept("|")
	for {
		f, err := p.filterCall(nil)
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
		if !p.accept("|") {
			break
		}
	}
	return fs, p.end()
}

func (p *parser) params() ([]string, []expr, error) {
	var names []string
	var defs []expr
	if err := p.expect("("); err != nil {
		return nil, nil, err
	}
	for !p.accept(")") {
		nm := p.name()
		if nm == "" {
			return nil, nil, p.errf("expected a parameter name")
		}
		var def expr
		if p.accept("=") {
			var err error
			if def, err = p.expression(); err != nil {
				return nil, nil, err
			}
		}
		names, defs = append(names, nm), append(defs, def)
		if !p.accept(",") {
			if err := p.expect(")"); err != nil {
				return nil, nil, err
			}
			break
		}
	}
	return names, defs, nil
}

func (p *parser) parseMacro() (node, error) {
	n := &macroNode{name: p.name()}
	if n.name == "" {
		return nil, p.errf("expected a macro name")
	}
	var err error
	if n.params, n.defaults, err = p.params(); err != nil {
		return nil, err
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	n.body, _, err = p.parseBody("endmacro")
	return n, err
}

func (p *parser) parseCallBlock() (node, error) {
	n := &callBlockNode{}
	var err error
	if p.isOp("(") {
		if n.params, n.defaults, err = p.params(); err != nil {
			return nil, err
		}
	}
	x, err := p.unary()
	if err != nil {
		return nil, err
	}
	c, ok := x.(*callExpr)
	if !ok {
		return nil, p.errf("expected a call")
	}
	n.call = c
	if err := p.end(); err != nil {
		return nil, err
	}
	n.body, _, err = p.parseBody("endcall")
	return n, err
}
