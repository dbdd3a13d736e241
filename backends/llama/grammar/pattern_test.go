package grammar

import (
	"math/rand"
	"regexp"
	"strings"
	"testing"
)

// gbnfRegexp turns a pattern's GBNF expression (literals, classes,
// groups, counts, alternation) into an anchored Go regexp over the JSON
// string content.
func gbnfRegexp(t *testing.T, expr string) *regexp.Regexp {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(expr); i++ {
		switch ch := expr[i]; ch {
		case ' ':
		case '"':
			var lit strings.Builder
			for i++; expr[i] != '"'; i++ {
				if expr[i] == '\\' {
					i++
					switch expr[i] {
					case 'n':
						lit.WriteByte('\n')
					case 't':
						lit.WriteByte('\t')
					case 'r':
						lit.WriteByte('\r')
					default:
						lit.WriteByte(expr[i])
					}
					continue
				}
				lit.WriteByte(expr[i])
			}
			b.WriteString("(?:" + regexp.QuoteMeta(lit.String()) + ")")
		case '[':
			j := i + 1
			for expr[j] != ']' {
				if expr[j] == '\\' {
					j++
				}
				j++
			}
			b.WriteString(expr[i : j+1])
			i = j
		case '(':
			b.WriteString("(?:")
		default:
			b.WriteByte(ch)
		}
	}
	re, err := regexp.Compile("^(?:" + b.String() + ")$")
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return re
}

// TestPatternTranslation compares each anchored pattern's grammar with Go's
// regexp of the pattern on random strings: what the grammar accepts the
// pattern accepts, and (on plain ASCII) the other way round.
func TestPatternTranslation(t *testing.T) {
	cases := []struct {
		pattern, alphabet string
		subset            bool // the grammar is narrower (still sound)
	}{
		{`^\+?[0-9]{2,3}-[0-9]{3,4}$`, "+-0123456789a", false},
		{`^(cat|dog|bird)s?$`, "catdogbirs", false},
		{`^[A-Z][a-z]{1,5}\d\w?\.[^\s]{0,3}$`, "Aab9_. x", false},
		{`^(?:ab|a)(b|c)*d?$`, "abcd", false},
		{`^[^a-c]x{2}$`, "abcdx-^]", false},
		{`^[\]\-^]+$`, "]-^a", false},
		{`^a.c$`, "abc\t-", false},
		{`^(a{1,2}b){2}$`, "ab", false},
		{`^[a-f0-9]{4}(-[a-f0-9]{2})?$`, "af09-g", false},
		{`^x|y$`, "xya", true}, // (^x)|(y$), produced as ^(x|y)$
	}
	rng := rand.New(rand.NewSource(3))
	for _, c := range cases {
		conv := &converter{lim: Limits{}.withDefaults(), rules: map[string]string{}}
		expr, err := conv.pattern(c.pattern, "")
		if err != nil {
			t.Fatalf("%s: %v", c.pattern, err)
		}
		got := gbnfRegexp(t, expr)
		want := regexp.MustCompile(c.pattern)
		agree := 0
		for n := 0; n < 4000; n++ {
			var s strings.Builder
			for l := rng.Intn(9); l > 0; l-- {
				s.WriteByte(c.alphabet[rng.Intn(len(c.alphabet))])
			}
			in := s.String()
			g, w := got.MatchString(in), want.MatchString(in)
			if g && !w {
				t.Fatalf("%s: grammar accepts %q, the pattern does not (%s)", c.pattern, in, expr)
			}
			if w && !g && !c.subset && !strings.ContainsAny(in, "\t") {
				t.Fatalf("%s: grammar refuses %q, the pattern accepts it (%s)", c.pattern, in, expr)
			}
			if g {
				agree++
			}
		}
		if agree == 0 {
			t.Errorf("%s: no random string matched; the comparison proves nothing", c.pattern)
		}
	}
}
