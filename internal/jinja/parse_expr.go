package jinja

import (
	"strconv"
)

// Expressions, lowest precedence first.

func (p *parser) nest() error {
	p.depth++
	if p.depth > maxNesting {
		return p.errf("expression nested deeper than %d", maxNesting)
	}
	return nil
}

// tupleOrExpr is an expression, or a bare tuple "a, b".
func (p *parser) tupleOrExpr() (expr, error) {
	x, err := p.expression()
	if err != nil || !p.isOp(",") {
		return x, err
	}
	items := []expr{x}
	for p.accept(",") {
		if p.j == len(p.toks) {
			break
		}
		y, err := p.expression()
		if err != nil {
			return nil, err
		}
		items = append(items, y)
	}
	return &listExpr{items: items, tuple: true}, nil
}

func (p *parser) expression() (expr, error) {
	if err := p.nest(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	x, err := p.orExpr()
	if err != nil {
		return nil, err
	}
	for p.isName("if") {
		p.j++
		c, err := p.orExpr()
		if err != nil {
			return nil, err
		}
		var b expr
		if p.isName("else") {
			p.j++
			if b, err = p.orExpr(); err != nil {
				return nil, err
			}
		}
		x = &condExpr{cond: c, a: x, b: b}
	}
	return x, nil
}

func (p *parser) orExpr() (expr, error) {
	x, err := p.andExpr()
	for err == nil && p.isName("or") {
		p.j++
		var y expr
		if y, err = p.andExpr(); err == nil {
			x = &binExpr{op: "or", a: x, b: y}
		}
	}
	return x, err
}

func (p *parser) andExpr() (expr, error) {
	x, err := p.notExpr()
	for err == nil && p.isName("and") {
		p.j++
		var y expr
		if y, err = p.notExpr(); err == nil {
			x = &binExpr{op: "and", a: x, b: y}
		}
	}
	return x, err
}

func (p *parser) notExpr() (expr, error) {
	if p.isName("not") {
		p.j++
		if err := p.nest(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		x, err := p.notExpr()
		return &unaryExpr{op: "not", x: x}, err
	}
	return p.compare()
}

func (p *parser) compare() (expr, error) {
	x, err := p.concat()
	if err != nil {
		return nil, err
	}
	c := &cmpExpr{first: x}
	for {
		t := p.peek()
		var op string
		switch {
		case t.kind == tokOp && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" || t.text == "<=" || t.text == ">="):
			op = t.text
			p.j++
		case t.kind == tokName && t.text == "in":
			op = "in"
			p.j++
		case t.kind == tokName && t.text == "not" && p.j+1 < len(p.toks) && p.toks[p.j+1].kind == tokName && p.toks[p.j+1].text == "in":
			op = "notin"
			p.j += 2
		}
		if op == "" {
			break
		}
		y, err := p.concat()
		if err != nil {
			return nil, err
		}
		c.ops, c.rest = append(c.ops, op), append(c.rest, y)
	}
	if len(c.ops) == 0 {
		return x, nil
	}
	return c, nil
}

func (p *parser) concat() (expr, error) {
	x, err := p.arith(0)
	for err == nil && p.isOp("~") {
		p.j++
		var y expr
		if y, err = p.arith(0); err == nil {
			x = &binExpr{op: "~", a: x, b: y}
		}
	}
	return x, err
}

var arithLevels = [][]string{{"+", "-"}, {"*", "/", "//", "%"}}

func (p *parser) arith(level int) (expr, error) {
	if level == len(arithLevels) {
		return p.pow()
	}
	x, err := p.arith(level + 1)
	for err == nil {
		t := p.peek()
		found := false
		for _, op := range arithLevels[level] {
			if t.kind == tokOp && t.text == op {
				found = true
			}
		}
		if !found {
			break
		}
		p.j++
		var y expr
		if y, err = p.arith(level + 1); err == nil {
			x = &binExpr{op: t.text, a: x, b: y}
		}
	}
	return x, err
}

func (p *parser) pow() (expr, error) {
	x, err := p.unary()
	for err == nil && p.isOp("**") {
		p.j++
		var y expr
		if y, err = p.unary(); err == nil {
			x = &binExpr{op: "**", a: x, b: y}
		}
	}
	return x, err
}

// unary is a unary expression with its filters and tests: as in Jinja,
// -x|abs is (-x)|abs.
func (p *parser) unary() (expr, error) {
	x, err := p.unaryOperand()
	if err != nil {
		return nil, err
	}
	return p.filters(x)
}

func (p *parser) unaryOperand() (expr, error) {
	if p.isOp("-") || p.isOp("+") {
		op := p.next().text
		if err := p.nest(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		x, err := p.unaryOperand()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{op: op, x: x}, nil
	}
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	return p.postfix(x)
}

func (p *parser) filters(x expr) (expr, error) {
	for {
		switch {
		case p.isOp("|"):
			p.j++
			f, err := p.filterCall(x)
			if err != nil {
				return nil, err
			}
			x = f
			if x, err = p.postfix(x); err != nil {
				return nil, err
			}
		case p.isName("is"):
			p.j++
			t := &testExpr{x: x}
			if p.isName("not") {
				p.j++
				t.negate = true
			}
			t.name = p.name()
			if t.name == "" {
				if tk := p.peek(); tk.kind == tokOp || tk.kind == tokEOF {
					return nil, p.errf("expected a test name")
				}
				t.name = p.next().text // is none / is true are names; numbers are not tests
			}
			if p.isOp("(") {
				args, _, err := p.callArgs()
				if err != nil {
					return nil, err
				}
				t.args = args
			} else if tk := p.peek(); tk.kind == tokString || tk.kind == tokInt || tk.kind == tokFloat || (tk.kind == tokName && !isKeyword(tk.text)) {
				a, err := p.primary()
				if err != nil {
					return nil, err
				}
				if a, err = p.postfix(a); err != nil {
					return nil, err
				}
				t.args = []expr{a}
			}
			x = t
		default:
			return x, nil
		}
	}
}

func isKeyword(s string) bool {
	switch s {
	case "and", "or", "not", "in", "is", "if", "else", "recursive":
		return true
	}
	return false
}

func (p *parser) filterCall(x expr) (*filterExpr, error) {
	f := &filterExpr{x: x, name: p.name()}
	if f.name == "" {
		return nil, p.errf("expected a filter name")
	}
	for p.accept(".") {
		f.name += "." + p.name()
	}
	if p.isOp("(") {
		args, kw, err := p.callArgs()
		if err != nil {
			return nil, err
		}
		f.args, f.kwargs = args, kw
	}
	return f, nil
}

func (p *parser) callArgs() ([]expr, []kwarg, error) {
	if err := p.expect("("); err != nil {
		return nil, nil, err
	}
	var args []expr
	var kw []kwarg
	for !p.accept(")") {
		if t := p.peek(); t.kind == tokName && p.j+1 < len(p.toks) && p.toks[p.j+1].kind == tokOp && p.toks[p.j+1].text == "=" {
			p.j += 2
			x, err := p.expression()
			if err != nil {
				return nil, nil, err
			}
			kw = append(kw, kwarg{t.text, x})
		} else {
			if p.isOp("*") || p.isOp("**") {
				return nil, nil, p.errf("*args and **kwargs are not supported")
			}
			x, err := p.expression()
			if err != nil {
				return nil, nil, err
			}
			args = append(args, x)
		}
		if !p.accept(",") {
			if err := p.expect(")"); err != nil {
				return nil, nil, err
			}
			break
		}
	}
	return args, kw, nil
}

func (p *parser) postfix(x expr) (expr, error) {
	for {
		switch {
		case p.isOp("."):
			p.j++
			t := p.next()
			switch t.kind {
			case tokName:
				x = &attrExpr{x: x, name: t.text}
			case tokInt:
				n, _ := strconv.ParseInt(t.text, 10, 64)
				x = &itemExpr{x: x, key: &litExpr{n}}
			default:
				return nil, p.errf("expected an attribute name")
			}
		case p.isOp("["):
			p.j++
			if err := p.nest(); err != nil {
				return nil, err
			}
			var parts [3]expr
			colons := 0
			for {
				if p.isOp(":") {
					p.j++
					colons++
					if colons > 2 {
						return nil, p.errf("bad slice")
					}
					continue
				}
				if p.isOp("]") {
					p.j++
					break
				}
				if parts[colons] != nil {
					return nil, p.errf("bad subscript")
				}
				y, err := p.expression()
				if err != nil {
					return nil, err
				}
				parts[colons] = y
			}
			p.depth--
			if colons == 0 {
				if parts[0] == nil {
					return nil, p.errf("empty subscript")
				}
				x = &itemExpr{x: x, key: parts[0]}
			} else {
				x = &sliceExpr{x: x, lo: parts[0], hi: parts[1], step: parts[2]}
			}
		case p.isOp("("):
			args, kw, err := p.callArgs()
			if err != nil {
				return nil, err
			}
			x = &callExpr{fn: x, args: args, kwargs: kw}
		default:
			return x, nil
		}
	}
}

func (p *parser) primary() (expr, error) {
	t := p.next()
	switch t.kind {
	case tokName:
		switch t.text {
		case "true", "True":
			return &litExpr{true}, nil
		case "false", "False":
			return &litExpr{false}, nil
		case "none", "None":
			return &litExpr{nil}, nil
		}
		return &nameExpr{t.text}, nil
	case tokString:
		s := t.text
		for p.peek().kind == tokString {
			s += p.next().text
		}
		return &litExpr{s}, nil
	case tokInt:
		n, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return nil, p.errf("integer %s out of range", t.text)
		}
		return &litExpr{n}, nil
	case tokFloat:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, p.errf("bad number %s", t.text)
		}
		return &litExpr{f}, nil
	case tokOp:
		if err := p.nest(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		switch t.text {
		case "(":
			if p.accept(")") {
				return &listExpr{tuple: true}, nil
			}
			x, err := p.expression()
			if err != nil {
				return nil, err
			}
			if p.accept(")") {
				return x, nil
			}
			l := &listExpr{items: []expr{x}, tuple: true}
			for p.accept(",") {
				if p.isOp(")") {
					break
				}
				y, err := p.expression()
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, y)
			}
			return l, p.expect(")")
		case "[":
			l := &listExpr{}
			for !p.accept("]") {
				y, err := p.expression()
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, y)
				if !p.accept(",") {
					if err := p.expect("]"); err != nil {
						return nil, err
					}
					break
				}
			}
			return l, nil
		case "{":
			d := &dictExpr{}
			for !p.accept("}") {
				k, err := p.expression()
				if err != nil {
					return nil, err
				}
				if err := p.expect(":"); err != nil {
					return nil, err
				}
				v, err := p.expression()
				if err != nil {
					return nil, err
				}
				d.keys, d.vals = append(d.keys, k), append(d.vals, v)
				if !p.accept(",") {
					if err := p.expect("}"); err != nil {
						return nil, err
					}
					break
				}
			}
			return d, nil
		}
	}
	if t.kind == tokEOF {
		return nil, p.errf("unexpected end of expression")
	}
	return nil, p.errf("unexpected %q", t.text)
}
