package grammar

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Limits bound the conversion. A zero field takes its default.
type Limits struct {
	MaxDepth  int // schema nesting, $ref and allOf expansion included (default 64)
	MaxRules  int // grammar rules (default 4096)
	MaxBytes  int // grammar text size (default 1 MiB)
	MaxRepeat int // sum of all bounded repetition counts (default 200000)
	MaxVisits int // schema nodes visited, expansion included (default 100000)
}

// Options tune FromSchema.
type Options struct {
	Limits Limits
}

func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = 64
	}
	if l.MaxRules <= 0 {
		l.MaxRules = 4096
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = 1 << 20
	}
	if l.MaxRepeat <= 0 {
		l.MaxRepeat = 200000
	}
	if l.MaxVisits <= 0 {
		l.MaxVisits = 100000
	}
	return l
}

// RootRule is the name of the grammar's start rule.
const RootRule = "root"

// FromSchema returns a GBNF grammar, rooted at RootRule, whose sentences are
// JSON texts the schema accepts (leading whitespace excluded, a bounded
// amount between tokens allowed). Every error matches ErrSchema.
func FromSchema(schema json.RawMessage, opts Options) (string, error) {
	lim := opts.Limits.withDefaults()
	root, err := parseJSON(schema, lim.MaxDepth*4)
	if err != nil {
		return "", err
	}
	c := &converter{
		root:  root,
		lim:   lim,
		rules: map[string]string{},
		refs:  map[string]string{},
		left:  map[string]bool{},
	}
	expr, err := c.visit(root, "", 0)
	if err != nil {
		return "", err
	}
	if err := c.addRule(RootRule, expr); err != nil {
		return "", err
	}
	return c.render()
}

// JSONObject returns the grammar of json_object mode: any JSON object.
func JSONObject() string {
	c := &converter{lim: Limits{}.withDefaults(), rules: map[string]string{}}
	_ = c.addRule(RootRule, c.prim("object"))
	g, _ := c.render()
	return g
}

type converter struct {
	root   any
	lim    Limits
	rules  map[string]string
	order  []string
	refs   map[string]string // $ref -> its rule name
	left   map[string]bool   // $refs entered since the last consumed token
	visits int
	repeat int
}

// spaceRule is bounded whitespace between tokens.
const spaceRule = `| " " | "\n" [ \t]{0,20}`

// primitives are the shared rules; each names the ones it uses.
var primitives = map[string]struct {
	body string
	deps []string
}{
	"space":         {spaceRule, nil},
	"boolean":       {`("true" | "false") space`, []string{"space"}},
	"null":          {`"null" space`, []string{"space"}},
	"integral-part": {`[0] | [1-9] [0-9]{0,15}`, nil},
	"decimal-part":  {`[0-9]{1,16}`, nil},
	"integer":       {`("-"? integral-part) space`, []string{"integral-part", "space"}},
	"number":        {`("-"? integral-part) ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})? space`, []string{"integral-part", "decimal-part", "space"}},
	"char":          {`[^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))`, nil},
	"string":        {`"\"" char* "\"" space`, []string{"char", "space"}},
	"value":         {`object | array | string | number | boolean | null`, []string{"object", "array", "string", "number", "boolean", "null"}},
	"object":        {`"{" space ( string ":" space value ("," space string ":" space value)* )? "}" space`, []string{"space", "string", "value"}},
	"array":         {`"[" space ( value ("," space value)* )? "]" space`, []string{"space", "value"}},
}

// prim adds a primitive rule (and those it uses) and returns its name.
func (c *converter) prim(name string) string {
	if _, ok := c.rules[name]; ok {
		return name
	}
	p := primitives[name]
	c.rules[name] = p.body
	c.order = append(c.order, name)
	for _, d := range p.deps {
		c.prim(d)
	}
	return name
}

var nonName = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// newRule reserves a fresh rule name derived from hint.
func (c *converter) newRule(hint string) (string, error) {
	if len(c.rules) >= c.lim.MaxRules {
		return "", &LimitError{Limit: "MaxRules", Max: c.lim.MaxRules}
	}
	base := strings.Trim(nonName.ReplaceAllString(hint, "-"), "-")
	if base == "" {
		base = "r"
	}
	if len(base) > 40 {
		base = base[:40]
	}
	base = "s-" + base
	name := base
	for i := 1; ; i++ {
		if _, taken := c.rules[name]; !taken {
			break
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
	c.rules[name] = "" // reserved
	c.order = append(c.order, name)
	return name, nil
}

func (c *converter) addRule(name, body string) error {
	if _, ok := c.rules[name]; !ok {
		if len(c.rules) >= c.lim.MaxRules {
			return &LimitError{Limit: "MaxRules", Max: c.lim.MaxRules}
		}
		c.order = append(c.order, name)
	}
	c.rules[name] = body
	return nil
}

// rule adds body under a fresh name and returns the name.
func (c *converter) rule(hint, body string) (string, error) {
	name, err := c.newRule(hint)
	if err != nil {
		return "", err
	}
	c.rules[name] = body
	return name, nil
}

func (c *converter) render() (string, error) {
	var b strings.Builder
	names := append([]string(nil), c.order...)
	sort.SliceStable(names, func(i, j int) bool { return names[i] == RootRule && names[j] != RootRule })
	for _, n := range names {
		b.WriteString(n)
		b.WriteString(" ::= ")
		b.WriteString(c.rules[n])
		b.WriteByte('\n')
		if b.Len() > c.lim.MaxBytes {
			return "", &LimitError{Limit: "MaxBytes", Max: c.lim.MaxBytes}
		}
	}
	return b.String(), nil
}

// lit is a GBNF literal matching s exactly.
func lit(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// maxRepetition is llama.cpp's grammar parser bound: a repetition count,
// times the counts of the repetitions nested inside it, stays below 2000.
const maxRepetition = 1999

// repeatExpr is x repeated min..max times (max < 0: unbounded); inner is
// the product of the counts nested inside x (1 for none). A maximum past
// llama.cpp's bound is lowered to it (a subset: fewer lengths, all valid);
// a minimum past it is a LimitError. It returns the expression and the
// product of counts it now holds.
func (c *converter) repeatExpr(x string, min, max, inner int, path string) (string, int, error) {
	if max >= 0 && max < min {
		return "", 0, &InvalidError{Path: path, Reason: fmt.Sprintf("maximum count %d below minimum %d", max, min)}
	}
	if max == 0 {
		return "", inner, nil
	}
	if inner < 1 {
		inner = 1
	}
	bound := maxRepetition / inner
	if min > bound {
		return "", 0, &LimitError{Limit: "repetition count", Max: bound, Path: path}
	}
	if max > bound {
		max = bound
	}
	cost := min
	if max > cost {
		cost = max
	}
	c.repeat += cost
	if c.repeat > c.lim.MaxRepeat {
		return "", 0, &LimitError{Limit: "MaxRepeat", Max: c.lim.MaxRepeat, Path: path}
	}
	weight := inner
	if cost > 1 {
		weight = inner * cost
	}
	g := "(" + x + ")"
	switch {
	case min == 0 && max == 1:
		return g + "?", weight, nil
	case min == 0 && max < 0:
		return g + "*", weight, nil
	case min == 1 && max < 0:
		return g + "+", weight, nil
	case max < 0:
		return fmt.Sprintf("%s{%d,}", g, min), weight, nil
	case min == max:
		return fmt.Sprintf("%s{%d}", g, min), weight, nil
	}
	return fmt.Sprintf("%s{%d,%d}", g, min, max), weight, nil
}
