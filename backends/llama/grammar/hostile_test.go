package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"testing"
)

func wantLimit(t *testing.T, name string, err error) {
	t.Helper()
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrSchema) {
		t.Errorf("%s: got %v, want a LimitError", name, err)
	}
}

// TestHostileSchemasBounded: deep nesting, huge enums, expansion bombs and
// huge counts are errors, not hangs; reference cycles that consume no text
// are errors; a cycle with no base case gives a small grammar llama.cpp
// compiles (generation is then bounded by the token limit).
func TestHostileSchemasBounded(t *testing.T) {
	deep := strings.Repeat(`{"type":"array","items":`, 10000) + `{}` + strings.Repeat(`}`, 10000)
	_, err := FromSchema(json.RawMessage(deep), Options{})
	wantLimit(t, "10000 levels", err)

	nested := strings.Repeat(`{"type":"array","items":`, 100) + `{}` + strings.Repeat(`}`, 100)
	_, err = FromSchema(json.RawMessage(nested), Options{})
	wantLimit(t, "100 levels", err)

	var enum strings.Builder
	enum.WriteString(`{"enum":[`)
	for i := 0; i < 200000; i++ {
		if i > 0 {
			enum.WriteByte(',')
		}
		fmt.Fprintf(&enum, `"value-%d"`, i)
	}
	enum.WriteString(`]}`)
	_, err = FromSchema(json.RawMessage(enum.String()), Options{})
	wantLimit(t, "200000-value enum", err)

	var bomb strings.Builder
	bomb.WriteString(`{"$ref":"#/$defs/a0","$defs":{`)
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&bomb, `"a%d":{"type":"object","anyOf":[{"$ref":"#/$defs/a%d"},{"$ref":"#/$defs/a%d"}]},`, i, i+1, i+1)
	}
	bomb.WriteString(`"a40":{"type":"object"}}}`)
	_, err = FromSchema(json.RawMessage(bomb.String()), Options{})
	wantLimit(t, "anyOf expansion bomb", err)

	for name, s := range map[string]string{
		"minItems 1e12":  `{"type":"array","minItems":1000000000000}`,
		"pattern count":  `{"type":"string","pattern":"^a{5000000}$"}`,
		"minLength 2500": `{"type":"string","minLength":2500}`,
		"nested counts":  `{"type":"string","pattern":"^(a{100}){100}$"}`,
		"long pattern":   `{"type":"string","pattern":"` + strings.Repeat("a", 5000) + `"}`,
		"deep pattern":   `{"type":"string","pattern":"` + strings.Repeat("(", 500) + "a" + strings.Repeat(")", 500) + `"}`,
		"allOf self":     `{"allOf":[{"$ref":"#"}]}`,
		"ref siblings":   `{"$ref":"#","type":"object"}`,
	} {
		_, err := FromSchema(json.RawMessage(s), Options{})
		wantLimit(t, name, err)
	}
	var manyRules strings.Builder
	manyRules.WriteString(`{"type":"object","properties":{`)
	for i := 0; i < 5000; i++ {
		if i > 0 {
			manyRules.WriteByte(',')
		}
		fmt.Fprintf(&manyRules, `"p%d":{"type":"string","maxLength":%d}`, i, i%7+1)
	}
	manyRules.WriteString(`}}`)
	_, err = FromSchema(json.RawMessage(manyRules.String()), Options{})
	wantLimit(t, "5000 properties", err)

	for name, s := range map[string]string{
		"self ref":       `{"$ref":"#"}`,
		"two-ref cycle":  `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		"anyOf self":     `{"anyOf":[{"$ref":"#"},{"type":"null"}]}`,
		"anyOf via defs": `{"$defs":{"x":{"anyOf":[{"type":"integer"},{"$ref":"#/$defs/y"}]},"y":{"anyOf":[{"$ref":"#/$defs/x"}]}},"$ref":"#/$defs/x"}`,
	} {
		_, err := FromSchema(json.RawMessage(s), Options{})
		var ie *InvalidError
		if !errors.As(err, &ie) {
			t.Errorf("%s: got %v, want an InvalidError", name, err)
		}
	}

	noBase := `{"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"],"additionalProperties":false}`
	g, err := FromSchema(json.RawMessage(noBase), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(g, "\n") > 5 || !compiles(t, g) {
		t.Errorf("no-base-case cycle: want a small compiling grammar, got:\n%s", g)
	}
	if out, done := generate(t, g, 1, 200); done {
		t.Errorf("a schema with no finite instance ended: %q", out)
	}
}

// TestLargeCountsCompile: maxima past llama.cpp's repetition bound (also
// when nested) are lowered to it, so its parser compiles them.
func TestLargeCountsCompile(t *testing.T) {
	for _, s := range []string{
		`{"type":"string","maxLength":20000}`,
		`{"type":"string","maxLength":1000000000}`,
		`{"type":"string","minLength":1500,"maxLength":3100}`,
		`{"type":"string","pattern":"^(a{0,100}b){0,100}$"}`,
		`{"type":"array","items":{"type":"integer"},"maxItems":5000}`,
		`{"type":"string","pattern":"^[a-z]{1500,4000}$"}`,
	} {
		g, err := FromSchema(json.RawMessage(s), Options{})
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		if !compiles(t, g) {
			t.Errorf("%s: llama.cpp rejects:\n%s", s, g)
		}
	}
}

// rangeRegexp turns an intRange expression (literals of digits and "-",
// digit classes, counts, groups, alternation) into an anchored regexp.
func rangeRegexp(t *testing.T, expr string) *regexp.Regexp {
	t.Helper()
	re := strings.NewReplacer(`"`, "", " ", "").Replace(expr)
	return regexp.MustCompile("^(?:" + re + ")$")
}

// TestIntRangeExact: the digit-range rules match exactly the integers in
// range, negative, mixed and wide bounds included.
func TestIntRangeExact(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	pairs := [][2]int64{{0, 0}, {0, 9}, {1, 10}, {-1, 1}, {-37, 1234}, {10, 99}, {100, 999}, {-999, -100}, {5, 5}, {-5, -5}, {19, 21}, {0, 1000}}
	for i := 0; i < 60; i++ {
		a, b := rng.Int63n(3001)-1500, rng.Int63n(3001)-1500
		if a > b {
			a, b = b, a
		}
		pairs = append(pairs, [2]int64{a, b})
	}
	for _, p := range pairs {
		re := rangeRegexp(t, intRange(p[0], p[1]))
		for x := int64(-2100); x <= 2100; x++ {
			want := x >= p[0] && x <= p[1]
			if got := re.MatchString(fmt.Sprint(x)); got != want {
				t.Fatalf("[%d,%d] on %d: match %v, want %v (%s)", p[0], p[1], x, got, want, intRange(p[0], p[1]))
			}
		}
		if re.MatchString("-0") || re.MatchString("007") {
			t.Fatalf("[%d,%d]: matches a non-JSON integer", p[0], p[1])
		}
	}
	lo, hi := int64(123456789012), int64(987654321098765)
	re := rangeRegexp(t, intRange(lo, hi))
	for _, x := range []int64{lo - 1, lo, lo + 1, 999999999999, 1000000000000, hi - 1, hi, hi + 1, 5e14, 99999999999} {
		if got, want := re.MatchString(fmt.Sprint(x)), x >= lo && x <= hi; got != want {
			t.Errorf("[%d,%d] on %d: match %v, want %v", lo, hi, x, got, want)
		}
	}
}
