package jinja

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// refCases are small templates for the corners of Jinja that chat templates
// lean on; each renders with the vars JSON below and is compared with the
// reference (python3-jinja2 with transformers' settings).
var refCases = []struct{ name, src string }{
	{"comment with quotes", "{#- Llama's comment -#}\n{% for m in messages %}{{ m.content + '{#' }}{# it's #}{% endfor %}"},
	{"comment trims", "a \n\t{#- x #} b|a {# x -#}\n  b|a \n{#- x' -#}\n b"},
	{"comment in string", `{{ "{# no" }}x{# yes #}{% set s = '{#' %}{{ s }}`},
	{"nested braces", `{{ {'a': {'b': '{#'}} }}{#c#}`},
	{"raw", "{% raw %}{# kept #}{{ x }}{% endraw %}{# gone #}"},
	{"trim and lstrip blocks", "<{% if true %}\n  yes\n  {% endif %}\n>\n    {% for i in [1,2] %}\n{{ i }}\n    {% endfor %}\nend\n"},
	{"plus disables lstrip", "a\n    {%+ if true %}x{% endif %}\n"},
	{"minus", "a  {%- if true -%}  b  {%- endif -%}  c {{- ' d ' -}} e"},
	{"final newline dropped", "x\n"},
	{"crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n"},
	{"tojson order and separators", "{{ tools | tojson }}|{{ tools[0] | tojson(indent=2) }}|{{ 'é & <b>' | tojson }}|{{ {'b': 1, 'a': [1.5, none, true]} | tojson }}"},
	{"tojson ensure_ascii and sort", "{{ 'é😀' | tojson(ensure_ascii=True) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=True) }}|{{ 3.0 | tojson }}|{{ 1e20 | tojson }}|{{ 0.0001 | tojson }}"},
	{"tojson generator refused", "{{ [1, 2] | map('string') | tojson }}"},
	{"python repr", "{{ [1, 'a', none, true, 2.5] }}|{{ {'k': \"it's\"} }}|{{ (1,) }}|{{ none }}|{{ 1/2 }}|{{ 7//2 }}|{{ -7 % 3 }}|{{ 2**10 }}"},
	{"markup escapes", `{{ "<a>"|safe + "<b> & 'c'" }}|{{ "x" ~ "<y>"|safe }}|{{ "<i>" | e }}`},
	{"loop", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('x', 'y') }};{% endfor %}"},
	{"loop filter else break continue", "{% for x in range(10) if x is odd %}{% if x > 6 %}{% break %}{% endif %}{% if x == 3 %}{% continue %}{% endif %}{{ x }}{{ loop.length }}{% else %}empty{% endfor %}{% for x in [] %}{% else %}none{% endfor %}"},
	{"scoping and namespace", "{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}{% if true %}{% set y = 5 %}{% endif %}{{ y }}"},
	{"macro defaults and caller", "{% macro m(a, b='B', c=none) %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, c=3) }}{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}"},
	{"set block and filter block", "{% set s %}  Hi {{ 1 }} {% endset %}[{{ s }}]{% filter upper %}abc{% endfilter %}{% set t | trim %}  x  {% endset %}[{{ t }}]"},
	{"undefined", "{{ nothere }}|{{ nothere is defined }}|{{ messages[0].nokey is defined }}|{{ nothere | default('d') }}|{{ '' | default('e', true) }}|{{ nothere | length }}|{% for x in nothere %}x{% endfor %}|{{ none.attr }}"},
	{"strings", "{{ ' a b '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a-b-c'.rsplit('-', 1) }}|{{ 'abc'.startswith(('x', 'a')) }}|{{ 'Hello'.upper() }}{{ 'Hello'.lower() }}|{{ 'a{}b{x}'.format(1, x=2) }}|{{ 'xyx'.lstrip('x') }}|{{ 'abc'[::-1] }}{{ 'abc'[1:] }}{{ 'abc'[-1] }}|{{ 'hello world'.title() }}|{{ 'aXa'.replace('a', 'b') }}|{{ 'abc'.find('c') }}|{{ 'a\\nb\\n'.splitlines() }}"},
	{"filters", "{{ [3, 1, 2] | sort }}|{{ ['b', 'A'] | sort }}|{{ [1, 2, 2, 1] | unique | list }}|{{ messages | map(attribute='role') | join(', ') }}|{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|{{ messages | rejectattr('role', 'eq', 'user') | list }}|{{ {'b': 1, 'a': 2} | dictsort }}|{{ {'b': 1, 'a': 2} | items | list }}|{{ 'x\\ny\\n' | indent(2) }}|{{ 'x\\ny' | indent(2, true) }}|{{ '3' | int + 1 }}|{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}|{{ [1,2] | reverse | list }}|{{ 'ab' | capitalize }}|{{ [1, 2] | sum }}|{{ [[1], [2]] | map('first') | list }}|{{ none | selectattr('x') | list }}"},
	{"tests", "{{ 1 is odd }}{{ 2 is even }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ none is none }}{{ 1 is number }}{{ 1.5 is float }}{{ 1 is integer }}{{ true is boolean }}{{ 'a' in 'abc' }}{{ 2 not in [1] }}{{ 6 is divisibleby 3 }}{{ 'ab' is lower }}{{ x is sameas none }}"},
	{"dict methods and int keys", "{% set d = {0: 'zero', 512: 'big', 'k': 'v'} %}{{ d[512] }}{{ d.get('k') }}{{ d.get('none', 'dflt') }}{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{{ d.keys() | list }}{{ 512 in d }}{{ d | tojson }}"},
	{"raise", "{% if messages[0].role == 'user' %}{{ raise_exception('no users here') }}{% endif %}"},
	{"strftime", "{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %H:%M:%S') }}|{{ strftime_now('%-d %B %A') }}"},
	{"sandbox refuses mutation", "{% set l = [] %}{{ l.append(1) }}"},
	{"unknown filter only when reached", "{% if false %}{{ x | from_json }}{% endif %}ok"},
	{"unknown filter reached", "{{ x | from_json }}"},
	{"conditional expression", "{{ 'a' if true else 'b' }}{{ 'a' if false }}|{{ 1 if none is none and not false or x }}"},
	{"generation block", "{% generation %}gen{% endgeneration %}"},
	{"string concat of literals", "{{ 'a' 'b' }}{{ \"c\" ~ 1 ~ none }}"},
	{"unary and filters", "{{ -3|abs }}|{{ -[1, 2]|length }}|{{ - 2 ** 2 }}|{{ not 1 in [1] }}"},
	{"comparison chain", "{{ 1 < 2 < 3 }}{{ 1 < 2 > 3 }}{{ [1, 2] == [1, 2] }}{{ 1 == 1.0 }}"},
	{"recursive loop", "{% for x in tree recursive %}[{{ x.n }}{% if x.c %}{{ loop(x.c) }}{% endif %}]{% endfor %}"},
}

const refVars = `{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
 "tools": [{"type": "function", "function": {"name": "f", "description": "d & <e>", "parameters": {"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "integer"}}}}}],
 "x": null,
 "tree": [{"n": 1, "c": [{"n": 2, "c": []}, {"n": 3}]}, {"n": 4}]}`

var refNow = time.Date(2026, 3, 5, 9, 7, 3, 0, time.UTC)

func TestAgainstReference(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "template-oracle", "oracle.py")
	templates := map[string]string{}
	var cases []map[string]any
	vars := map[string]any{}
	if err := json.Unmarshal([]byte(refVars), &vars); err != nil {
		t.Fatal(err)
	}
	for i, c := range refCases {
		id := strconv.Itoa(i)
		templates[id] = c.src
		cases = append(cases, map[string]any{"id": id, "template": id, "vars": json.RawMessage(refVars)})
	}
	req, _ := json.Marshal(map[string]any{"now": refNow.Format("2006-01-02T15:04:05"), "templates": templates, "cases": cases})
	cmd := exec.Command("python3", script)
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference renderer (python3-jinja2; make test installs it): %v: %s", err, stderr.String())
	}
	var res []struct {
		ID, Text, Error string
		Raised          bool
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	goVars, err := FromJSON([]byte(refVars))
	if err != nil {
		t.Fatal(err)
	}
	top := map[string]any{}
	for _, k := range goVars.(*Map).Keys() {
		top[k], _ = goVars.(*Map).Get(k)
	}
	for _, r := range res {
		i, _ := strconv.Atoi(r.ID)
		c := refCases[i]
		var got string
		tmpl, err := Compile(c.src)
		if err == nil {
			got, err = tmpl.Render(top, Options{Now: func() time.Time { return refNow }})
		}
		switch {
		case r.Error != "" && err == nil:
			t.Errorf("%s: the reference fails (%s), modeld renders %q", c.name, r.Error, got)
		case r.Error != "" && r.Raised && !errors.Is(err, ErrRaised):
			t.Errorf("%s: the reference raises (%s), modeld: %v", c.name, r.Error, err)
		case r.Error == "" && err != nil:
			t.Errorf("%s: modeld fails (%v), the reference renders %q", c.name, err, r.Text)
		case r.Error == "" && got != r.Text:
			t.Errorf("%s:\nmodeld    %q\nreference %q", c.name, got, r.Text)
		}
	}
	if len(res) != len(refCases) {
		t.Fatalf("%d results for %d cases", len(res), len(refCases))
	}
}

// TestOrderedJSON: request JSON keeps its key order through FromJSON and
// tojson, and numbers keep Python's types.
func TestOrderedJSON(t *testing.T) {
	v, err := FromJSON([]byte(`{"z": 1, "a": {"y": 2.0, "b": [1e2, -0, "é\u2028"]}, "m": null}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ToJSON(v, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"z": 1, "a": {"y": 2.0, "b": [100.0, 0, "é` + "\u2028" + `"]}, "m": null}`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !strings.Contains(got, `"z": 1, "a"`) {
		t.Error("key order lost")
	}
}
