package lark

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends/llama/grammar/internal/grammartest"
)

// patchGrammar is a patch format in the shape agents' edit tools use:
// rules, alternatives, + ? groups, aliases, line terminals /(.+)/ and
// /(.*)/, a common import.
const patchGrammar = `
start: header section+ footer
header: "=== BEGIN" LF
footer: "=== END" LF?

section: create | remove | edit
create: "=== NEW " path LF plus_line+
remove: "=== DROP " path LF
edit: "=== EDIT " path LF rename? body?

path: /(.+)/
plus_line: "+" /(.*)/ LF -> line

rename: "=== RENAME " path LF
body: (anchor | change)+ last_line?
anchor: ("##" | "## " /(.+)/) LF
change: ("+" | "-" | " ") /(.*)/ LF
last_line: "=== EOF" LF

%import common.LF
`

func mustParse(t *testing.T, text string) *Grammar {
	t.Helper()
	g, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The recognizer itself: texts the patch grammar accepts and rejects.
func TestRecognizerReadsThePatchGrammar(t *testing.T) {
	r := newRecognizer(mustParse(t, patchGrammar))
	for _, s := range []string{
		"=== BEGIN\n=== NEW a.txt\n+hello\n+\n=== END\n",
		"=== BEGIN\n=== DROP b\n=== END",
		"=== BEGIN\n=== EDIT c\n=== RENAME d\n##\n-x\n+y\n z\n=== EOF\n=== DROP e\n=== END\n",
		"=== BEGIN\n=== EDIT c\n## f()\n+y\n=== END\n",
	} {
		if !r.accepts(s) {
			t.Errorf("rejects %q", s)
		}
	}
	for _, s := range []string{
		"",
		"=== BEGIN\n=== END\n",                 // no section
		"=== BEGIN\n=== NEW a\n=== END\n",      // a new file needs lines
		"=== BEGIN\n=== NEW \n+x\n=== END\n",   // an empty path
		"=== BEGIN\n=== DROP b\n=== END\n\n",   // text after the end
		"=== BEGIN\n=== EDIT c\n*x\n=== END\n", // not a change line
	} {
		if r.accepts(s) {
			t.Errorf("accepts %q", s)
		}
	}
}

func TestGBNFOfThePatchGrammar(t *testing.T) {
	g, err := Translate(patchGrammar, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"root ::= lark-r-start\n",
		`lark-r-plus-line ::= ("+" ([^\x0A])* lark-t-LF)`,
		`lark-t-LF ::= [\x0A]`,
		`lark-r-create ::= ("=== NEW " lark-r-path lark-t-LF (lark-r-plus-line)+)`,
	} {
		if !strings.Contains(g, want) {
			t.Errorf("GBNF lacks %q:\n%s", want, g)
		}
	}
	if !compiles(t, g) {
		t.Fatalf("llama.cpp refuses:\n%s", g)
	}
	j, err := Translate(patchGrammar, Options{JSONString: true, Prefix: "x-", Root: "input"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(j, "input ::= x-r-start\n") || !strings.Contains(j, `x-t-LF ::= "\\n"`) {
		t.Errorf("JSON-string GBNF:\n%s", j)
	}
	if !compiles(t, "root ::= \"\\\"\" input \"\\\"\"\n"+j) {
		t.Fatalf("llama.cpp refuses:\n%s", j)
	}
}

// Texts sampled under the GBNF by llama.cpp's grammar sampler from random
// weights parse under the Lark grammar, raw and as JSON string bodies.
func TestSampledPatchesParse(t *testing.T) {
	checkSamples(t, patchGrammar, 12, map[string]float32{"\n": 7, "=": 4, "E": 6, " E": 8, "END": 8, " END": 8, "ND": 6, "N": 4})
}

func TestSampledCommonTerminalsParse(t *testing.T) {
	checkSamples(t, `
start: item ("," _WS? item)* LF
item: INT | SIGNED_NUMBER | WORD | CNAME "=" ESCAPED_STRING | /[a-f]{2,4}/i | "x"i "y" | "0".."7"~2..3 | _WS
_WS: WS_INLINE
%import common (INT, SIGNED_NUMBER, WORD, CNAME, ESCAPED_STRING, WS_INLINE)
%import common.LF
%ignore WS_INLINE
`, 12, map[string]float32{"\n": 7, ",": 2, "\"": 4})
}

func checkSamples(t *testing.T, text string, n int, bias map[string]float32) {
	t.Helper()
	g := mustParse(t, text)
	r := newRecognizer(g)
	for _, mode := range []Options{{}, {JSONString: true}} {
		gb, err := g.GBNF(mode)
		if err != nil {
			t.Fatal(err)
		}
		b := bias
		if mode.JSONString {
			b = map[string]float32{}
			for k, v := range bias {
				b[mustJSONBody(k)] = v
			}
			if v, ok := bias["\n"]; ok {
				b[`\`], b["n"] = v-3, v-2
			}
		}
		done := 0
		for seed := uint32(1); seed <= uint32(n); seed++ {
			out, ended := generate(t, gb, seed, 800, b)
			if !ended {
				t.Logf("seed %d: no end within the token limit: %q", seed, out)
				continue
			}
			done++
			text := out
			if mode.JSONString {
				if err := json.Unmarshal([]byte(`"`+out+`"`), &text); err != nil {
					t.Errorf("json %v seed %d: %q is not a JSON string body: %v", mode.JSONString, seed, out, err)
					continue
				}
			}
			if !r.accepts(text) {
				t.Errorf("json %v seed %d: the Lark grammar rejects %q", mode.JSONString, seed, text)
			}
		}
		if done < n/4 {
			t.Errorf("json %v: only %d of %d samples ended", mode.JSONString, done, n)
		}
	}
}

func mustJSONBody(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func TestRegexSyntax(t *testing.T) {
	g, err := Regex(`[A-Z][a-z]{1,5}( [0-9]+)?`, "")
	if err != nil {
		t.Fatal(err)
	}
	gb, err := g.GBNF(Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRecognizer(g)
	for seed := uint32(1); seed <= 8; seed++ {
		out, ended := generate(t, gb, seed, 200, map[string]float32{" ": 2})
		if !ended || !r.accepts(out) {
			t.Errorf("seed %d: %q (ended %v) does not match", seed, out, ended)
		}
	}
}

func TestUnsupportedConstructsAreNamed(t *testing.T) {
	for _, c := range []struct{ grammar, construct string }{
		{`start: /^a/`, `the anchor '^'`},
		{`start: /a$/`, `the anchor '$'`},
		{`start: /a(?=b)/`, "lookaround"},
		{`start: /(a)\1/`, "a backreference"},
		{`start: /a*?/`, "a lazy quantifier"},
		{`start: /(?i)a/`, "an inline group flag or extension (?...)"},
		{`start: /a/x`, `the 'x' flag`},
		{`start: /\bword/`, `the anchor \b`},
		{`start: /\p{L}/`, `the escape \p`},
		{"start: item\nitem: start \"a\" | \"b\"", "left recursion"},
		{"start: _sep{a, \",\"}\n_sep{x, s}: x (s x)*", "a rule template"},
		{"start: A\n%declare A", "the %declare directive"},
		{"start: X\n%import python.X", `%import of module "python"`},
		{`start: "a"~1001`, "a repetition count over 1000"},
	} {
		_, err := Translate(c.grammar, Options{})
		var ue *UnsupportedError
		if !errors.As(err, &ue) || ue.Construct != c.construct {
			t.Errorf("%q: err %v, want the construct %q", c.grammar, err, c.construct)
		}
	}
}

func TestSyntaxErrors(t *testing.T) {
	for _, c := range []struct{ grammar, want string }{
		{`item: "a"`, "no start rule"},
		{`start: item`, "start refers to item, which is not defined"},
		{`start: "a`, "string literal is not closed"},
		{`start: /a`, "regular expression is not closed"},
		{"start: \"a\"\nstart: \"b\"", "start is defined twice"},
		{"start: A\nA: b\nb: \"x\"", "terminal A refers to rule b"},
		{`start: "a" )`, "expected the end of the line"},
		{`start: "b".."a"`, "needs two single characters in order"},
		{"start: X\n%import common.NOPE -> X", "common has no terminal NOPE"},
	} {
		_, err := Translate(c.grammar, Options{})
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want a syntax error with %q", c.grammar, err, c.want)
		}
	}
}

// tinyModel is the random-weight model the sampling tests draw from.
func tinyModel(t *testing.T) (yz.Model, yz.Vocab) { return grammartest.TinyModel(t) }

func compiles(t *testing.T, g string) bool {
	t.Helper()
	_, vocab := tinyModel(t)
	s := yz.SamplerInitGrammar(vocab, g, "root")
	if s == 0 {
		return false
	}
	yz.SamplerFree(s)
	return true
}

// generate samples up to maxTokens tokens under grammar g with seed, the
// tokens whose text is a key of bias raised by its value (so that random
// weights end lines and sections); ended: the grammar let the model stop.
func generate(t *testing.T, g string, seed uint32, maxTokens int, bias map[string]float32) (string, bool) {
	t.Helper()
	model, vocab := tinyModel(t)
	gs := yz.SamplerInitGrammar(vocab, g, "root")
	if gs == 0 {
		t.Fatalf("llama.cpp rejected the grammar:\n%s", g)
	}
	chain := yz.SamplerChainInit(yz.SamplerChainDefaultParams())
	defer yz.SamplerFree(chain)
	n := yz.VocabNTokens(vocab)
	buf := make([]byte, 256)
	piece := func(tok yz.Token) string {
		k := yz.TokenToPiece(vocab, tok, buf, 0, false)
		if k < 0 {
			t.Fatalf("token %d: piece longer than %d bytes", tok, len(buf))
		}
		return string(buf[:k])
	}
	var biases []yz.LogitBias
	for id := int32(0); id < n; id++ {
		if v, ok := bias[piece(yz.Token(id))]; ok {
			biases = append(biases, yz.LogitBias{Token: yz.Token(id), Bias: v})
		}
	}
	if len(biases) > 0 {
		yz.SamplerChainAdd(chain, yz.SamplerInitLogitBias(n, int32(len(biases)), &biases[0]))
	}
	yz.SamplerChainAdd(chain, gs)
	yz.SamplerChainAdd(chain, yz.SamplerInitDist(seed))
	params := yz.ContextDefaultParams()
	params.NCtx = uint32(maxTokens + 48)
	params.NBatch = 16
	params.NUbatch = 16
	params.NSeqMax = 1
	params.NThreads = 1
	params.NThreadsBatch = 1
	ctx, err := yz.InitFromModel(model, params)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := yz.Free(ctx); err != nil {
			t.Error(err)
		}
	}()
	if _, err := yz.Decode(ctx, yz.BatchGetOne(yz.Tokenize(vocab, "{", true, false))); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for i := 0; i < maxTokens; i++ {
		tok := yz.SamplerSample(chain, ctx, -1)
		if yz.VocabIsEOG(vocab, tok) {
			return out.String(), true
		}
		out.WriteString(piece(tok))
		if _, err := yz.Decode(ctx, yz.BatchGetOne([]yz.Token{tok})); err != nil {
			t.Fatal(err)
		}
	}
	return out.String(), false
}
