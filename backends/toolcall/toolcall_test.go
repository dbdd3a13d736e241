package toolcall

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends"
)

func seqID(i int) string { return "call_" + strconv.Itoa(i) }

type call struct{ name, args string }

type sample struct {
	name    string
	family  Family
	text    string
	content string
	calls   []call
	err     error // ErrIncomplete, errSyntax or nil
}

// errSyntax stands for any *SyntaxError in a sample.
var errSyntax = errors.New("syntax error")

const weather = `{"location": "Paris, France", "unit": "celsius"}`

// tricky arguments: nested JSON, escapes, unicode and marker-like text.
const tricky = `{"q": "say \"</tool_call>\" or <tool_call> [TOOL_CALLS] >>>all\n<｜tool▁call▁end｜> \u00e9 ✓ 😀", "nested": {"a": [1, 2.5e-3, -0, true, null, {"b": "}]"}], "c": {}}, "emoji": "日本語"}`

var samples = []sample{
	// Hermes
	{"hermes single", Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + weather + "}\n</tool_call>", "", []call{{"get_weather", weather}}, nil},
	{"hermes parallel", Hermes, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>", "", []call{{"a", `{"x": 1}`}, {"b", `{}`}}, nil},
	{"hermes after content", Hermes, "Let me check the weather.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + weather + "}\n</tool_call>\n", "Let me check the weather.", []call{{"get_weather", weather}}, nil},
	{"hermes after think", Hermes, "<think>\nThe user wants <tool_call>-free reasoning? No.\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", "<think>\nThe user wants <tool_call>-free reasoning? No.\n</think>", []call{{"f", "{}"}}, nil},
	{"hermes think then call", Hermes, "<think>\nI should call f.\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": \"v\"}}\n</tool_call>", "<think>\nI should call f.\n</think>", []call{{"f", `{"k": "v"}`}}, nil},
	{"hermes tricky", Hermes, "<tool_call>{\"name\": \"search\", \"arguments\": " + tricky + "}</tool_call>", "", []call{{"search", tricky}}, nil},
	{"hermes arguments first", Hermes, "<tool_call>\n{\"arguments\": {\"x\": [1]}, \"id\": 7, \"name\": \"late\"}\n</tool_call>", "", []call{{"late", `{"x": [1]}`}}, nil},
	{"hermes string arguments", Hermes, "<tool_call>\n{\"name\": \"s\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>", "", []call{{"s", `{"x": 1}`}}, nil},
	{"hermes no closing tag", Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"b\"}}", "", []call{{"f", `{"a": "b"}`}}, nil},
	{"hermes cut", Hermes, "Sure.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"b", "Sure.", []call{{"f", `{"a": "b`}}, ErrIncomplete},
	{"hermes cut before name", Hermes, "<tool_call>\n{\"na", "", nil, ErrIncomplete},
	{"hermes marker as text", Hermes, "Use the <tool_call> tag like this: <tool_call> x", "Use the <tool_call> tag like this: <tool_call> x", nil, nil},
	{"hermes marker at end", Hermes, "a <tool_call>", "a <tool_call>", nil, nil},
	{"hermes partial marker at end", Hermes, "a <tool_ca", "a <tool_ca", nil, nil},
	{"hermes malformed", Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\" 1}}\n</tool_call>", "", []call{{"f", `{"a" `}}, errSyntax},
	{"hermes no name", Hermes, "<tool_call>{\"arguments\": {}}</tool_call>", "", nil, errSyntax},
	{"hermes array", Hermes, "<tool_call>[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"x\": 1}}]</tool_call>", "", []call{{"a", "{}"}, {"b", `{"x": 1}`}}, nil},
	{"hermes xml form is content", Hermes, "<tool_call>\n<function=f>\n<parameter=a>1</parameter>\n</function>\n</tool_call>", "<tool_call>\n<function=f>\n<parameter=a>1</parameter>\n</function>\n</tool_call>", nil, nil},
	{"hermes plain", Hermes, "Hello, world!\n", "Hello, world!\n", nil, nil},
	{"hermes content between", Hermes, "First.\n<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\nThen.\n<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>  ", "First.Then.", []call{{"a", "{}"}, {"b", "{}"}}, nil},

	// Llama 3.x
	{"llama json", Llama3, `{"name": "get_weather", "parameters": ` + weather + `}`, "", []call{{"get_weather", weather}}, nil},
	{"llama json type", Llama3, "\n{\"type\": \"function\", \"name\": \"f\", \"parameters\": {\"n\": 3}}", "", []call{{"f", `{"n": 3}`}}, nil},
	{"llama python_tag", Llama3, `<|python_tag|>{"name": "f", "parameters": ` + tricky + `}`, "", []call{{"f", tricky}}, nil},
	{"llama parallel", Llama3, `{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": "y"}}`, "", []call{{"a", "{}"}, {"b", `{"x": "y"}`}}, nil},
	{"llama content then tag", Llama3, "I will search.<|python_tag|>{\"name\": \"s\", \"arguments\": {\"q\": \"x\"}}", "I will search.", []call{{"s", `{"q": "x"}`}}, nil},
	{"llama json not a call", Llama3, `{"answer": 42}`, `{"answer": 42}`, nil, nil},
	{"llama json mid text", Llama3, `Here: {"name": "f", "parameters": {}}`, `Here: {"name": "f", "parameters": {}}`, nil, nil},
	{"llama builtin", Llama3, `<|python_tag|>brave_search.call(query="weather in \"Paris\" today", n=3, safe=True, lang=None, x='it\'s')`, "", []call{{"brave_search", `{"query": "weather in \"Paris\" today", "n": 3, "safe": true, "lang": null, "x": "it's"}`}}, nil},
	{"llama builtin no args", Llama3, "<|python_tag|>wolfram_alpha.call()", "", []call{{"wolfram_alpha", "{}"}}, nil},
	{"llama code is content", Llama3, "<|python_tag|>import math\nprint(math.pi)", "<|python_tag|>import math\nprint(math.pi)", nil, nil},
	{"llama builtin cut", Llama3, `<|python_tag|>brave_search.call(query="x`, "", []call{{"brave_search", ""}}, ErrIncomplete},
	{"llama builtin bad", Llama3, `<|python_tag|>brave_search.call(query=x)`, "", []call{{"brave_search", ""}}, errSyntax},
	{"llama cut", Llama3, `{"name": "f", "parameters": {"a": [1, 2`, "", []call{{"f", `{"a": [1, 2`}}, ErrIncomplete},
	{"llama brace only", Llama3, `{`, `{`, nil, nil},

	// Mistral
	{"mistral nemo", Mistral, `[TOOL_CALLS][{"name": "get_weather", "arguments": ` + weather + `, "id": "abcDEF123"}]`, "", []call{{"get_weather", weather}}, nil},
	{"mistral nemo parallel", Mistral, `Checking.[TOOL_CALLS] [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": ` + tricky + `}]`, "Checking.", []call{{"a", `{"x": 1}`}, {"b", tricky}}, nil},
	{"mistral small", Mistral, `[TOOL_CALLS]get_weather[ARGS]` + weather, "", []call{{"get_weather", weather}}, nil},
	{"mistral small call id", Mistral, `[TOOL_CALLS]a[CALL_ID]abc123XYZ[ARGS]{"x": 1}[TOOL_CALLS]b[CALL_ID]def456UVW[ARGS]` + tricky, "", []call{{"a", `{"x": 1}`}, {"b", tricky}}, nil},
	{"mistral small cut", Mistral, `[TOOL_CALLS]f[ARGS]{"a": "`, "", []call{{"f", `{"a": "`}}, ErrIncomplete},
	{"mistral bad args", Mistral, `[TOOL_CALLS]f[ARGS]nope`, "", []call{{"f", ""}}, errSyntax},

	// DeepSeek
	{"deepseek r1", DeepSeek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n" + weather + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "", []call{{"get_weather", weather}}, nil},
	{"deepseek r1 parallel after think", DeepSeek, "<think>\nok\n</think>\n\nCalling.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>a\n```json\n{\"x\": 1}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>b\n```json\n" + tricky + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "<think>\nok\n</think>\n\nCalling.", []call{{"a", `{"x": 1}`}, {"b", tricky}}, nil},
	{"deepseek v3.1", DeepSeek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>" + weather + "<｜tool▁call▁end｜><｜tool▁call▁begin｜>b<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "", []call{{"get_weather", weather}, {"b", "{}"}}, nil},
	{"deepseek bare call", DeepSeek, "<｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1}<｜tool▁call▁end｜>", "", []call{{"f", `{"a": 1}`}}, nil},
	{"deepseek later begin is text", DeepSeek, "<｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜> <｜tool▁call▁begin｜> not a call", "<｜tool▁call▁begin｜> not a call", []call{{"f", "{}"}}, nil},
	{"deepseek cut", DeepSeek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\"", "", []call{{"f", `{"a"`}}, ErrIncomplete},

	// functionary v3.1
	{"functionary31 single", FunctionaryV31, `<function=get_weather>` + weather + `</function>`, "", []call{{"get_weather", weather}}, nil},
	{"functionary31 parallel", FunctionaryV31, "Sure!\n<function=a>{\"x\": 1}</function>\n<function=b>" + tricky + "</function>", "Sure!", []call{{"a", `{"x": 1}`}, {"b", tricky}}, nil},
	{"functionary31 not a call", FunctionaryV31, "x <function=not a name> y", "x <function=not a name> y", nil, nil},

	// functionary v3.2
	{"functionary32 content", FunctionaryV32, "all\nHello, world!\nWhat's up?", "Hello, world!\nWhat's up?", nil, nil},
	{"functionary32 call", FunctionaryV32, "get_weather\n" + weather, "", []call{{"get_weather", weather}}, nil},
	{"functionary32 content then calls", FunctionaryV32, "all\nLet me check.\n>>>a\n{\"x\": 1}\n>>>b\n" + tricky, "Let me check.", []call{{"a", `{"x": 1}`}, {"b", tricky}}, nil},
	{"functionary32 plain", FunctionaryV32, "Hello there\n>>>", "Hello there\n>>>", nil, nil},

	// Command R
	{"command r plus", CommandR, "Action:\n```json\n[\n    {\n        \"tool_name\": \"get_weather\",\n        \"parameters\": " + weather + "\n    }\n]\n```", "", []call{{"get_weather", weather}}, nil},
	{"command r7b", CommandR, "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"a\", \"parameters\": {\"x\": 1}},\n    {\"tool_call_id\": \"1\", \"tool_name\": \"b\", \"parameters\": " + tricky + "}\n]<|END_ACTION|>", "", []call{{"a", `{"x": 1}`}, {"b", tricky}}, nil},
	{"command r action text", CommandR, "Action: none needed.", "Action: none needed.", nil, nil},

	// Granite
	{"granite", Granite, `<|tool_call|>[{"name": "get_weather", "arguments": ` + weather + `}]`, "", []call{{"get_weather", weather}}, nil},
	{"granite parallel", Granite, `Ok.<|tool_call|>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": ` + tricky + `}]`, "Ok.", []call{{"a", "{}"}, {"b", tricky}}, nil},

	// Generic
	{"generic", Generic, `{"tool_calls": [{"name": "get_weather", "arguments": ` + weather + `}]}`, "", []call{{"get_weather", weather}}, nil},
	{"generic parallel", Generic, " {\"tool_calls\": [{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": " + tricky + "}]}\n", "", []call{{"a", "{}"}, {"b", tricky}}, nil},
	{"generic content", Generic, `The answer is {"tool_calls": 1}.`, `The answer is {"tool_calls": 1}.`, nil, nil},
	{"generic other object", Generic, `{"response": "hi"}`, `{"response": "hi"}`, nil, nil},
	{"generic cut", Generic, `{"tool_calls": [{"name": "f", "arguments": {"a": 1`, "", []call{{"f", `{"a": 1`}}, ErrIncomplete},
}

func checkErr(t *testing.T, got, want error) {
	t.Helper()
	var se *SyntaxError
	switch {
	case want == errSyntax:
		if !errors.As(got, &se) {
			t.Fatalf("error = %v, want a *SyntaxError", got)
		}
	case !errors.Is(got, want) || (want == nil) != (got == nil):
		t.Fatalf("error = %v, want %v", got, want)
	}
}

func toCalls(cs []backends.ToolCall) []call {
	var out []call
	for _, c := range cs {
		out = append(out, call{c.Name, c.Arguments})
	}
	return out
}

func TestParse(t *testing.T) {
	for _, s := range samples {
		t.Run(s.name, func(t *testing.T) {
			content, calls, err := Parse(s.family, s.text, seqID)
			checkErr(t, err, s.err)
			if content != s.content {
				t.Errorf("content = %q, want %q", content, s.content)
			}
			if got := toCalls(calls); !reflect.DeepEqual(got, s.calls) {
				t.Errorf("calls = %q, want %q", got, s.calls)
			}
			for i, c := range calls {
				if c.ID != seqID(i) {
					t.Errorf("call %d ID = %q", i, c.ID)
				}
			}
		})
	}
}

// reassemble streams text in the given chunks and returns what the deltas
// add up to.
func reassemble(t testing.TB, f Family, chunks []string) (string, []backends.ToolCall, error) {
	st, err := NewStream(f, seqID)
	if err != nil {
		t.Fatal(err)
	}
	var content strings.Builder
	var calls []backends.ToolCall
	add := func(c string, ds []backends.ToolCallDelta) {
		content.WriteString(c)
		for _, d := range ds {
			switch {
			case d.Index == len(calls):
				if d.ID == "" || d.Name == "" {
					t.Fatalf("first delta of call %d has no ID or name: %+v", d.Index, d)
				}
				calls = append(calls, backends.ToolCall{ID: d.ID, Name: d.Name})
			case d.Index < len(calls):
				if d.ID != "" || d.Name != "" {
					t.Fatalf("later delta of call %d repeats ID or name: %+v", d.Index, d)
				}
			default:
				t.Fatalf("delta for call %d before call %d", d.Index, len(calls))
			}
			calls[d.Index].Arguments += d.Arguments
		}
	}
	var last error
	for _, ch := range chunks {
		c, ds, err := st.Feed(ch)
		add(c, ds)
		if err != nil {
			last = err
		}
	}
	c, ds, err := st.Close()
	add(c, ds)
	if err != nil {
		last = err
	}
	return content.String(), calls, last
}

func splits(text string, r *rand.Rand) [][]string {
	var out [][]string
	var bytes []string
	for i := range len(text) {
		bytes = append(bytes, text[i:i+1])
	}
	out = append(out, bytes, []string{text})
	for i := 1; i < len(text); i++ {
		out = append(out, []string{text[:i], text[i:]})
	}
	for range 20 {
		var ch []string
		rest := text
		for rest != "" {
			n := 1 + r.IntN(min(len(rest), 12))
			ch, rest = append(ch, rest[:n]), rest[n:]
		}
		out = append(out, ch)
	}
	return out
}

func TestStreamReassembles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range samples {
		t.Run(s.name, func(t *testing.T) {
			wantContent, wantCalls, wantErr := Parse(s.family, s.text, seqID)
			for _, chunks := range splits(s.text, r) {
				content, calls, err := reassemble(t, s.family, chunks)
				if content != wantContent || !reflect.DeepEqual(calls, wantCalls) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
					t.Fatalf("chunks %q:\n got %q %q %v\nwant %q %q %v", chunks, content, calls, err, wantContent, wantCalls, wantErr)
				}
			}
		})
	}
}

// TestStreamHoldsMarkers checks that no content delta ever carries a piece
// of a call's markup: content released before a call is a prefix of the
// final content at every step.
func TestStreamHoldsMarkers(t *testing.T) {
	for _, s := range samples {
		if len(s.calls) == 0 {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			st, _ := NewStream(s.family, seqID)
			var got string
			for i := range len(s.text) {
				c, _, _ := st.Feed(s.text[i : i+1])
				got += c
				if !strings.HasPrefix(s.content, got) {
					t.Fatalf("after %q content so far is %q, not a prefix of %q", s.text[:i+1], got, s.content)
				}
			}
		})
	}
}

func TestTriggers(t *testing.T) {
	for _, s := range samples {
		if len(s.calls) == 0 {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			trig, err := s.family.Triggers()
			if err != nil {
				t.Fatal(err)
			}
			fired := false
			for _, tr := range trig {
				switch tr.Kind {
				case TriggerWord:
					fired = fired || strings.Contains(s.text, tr.Value)
				case TriggerPatternFull:
					m := regexp.MustCompile(`^(?:` + tr.Value + `)$`).FindStringSubmatchIndex(s.text)
					if m == nil {
						break
					}
					fired = true
					if len(m) < 4 || m[2] < 0 || !strings.HasPrefix(strings.TrimLeft(s.text, " \n"), s.text[m[2]:m[3]]) {
						t.Errorf("pattern %q: its first group does not mark the start of the call in %q", tr.Value, s.text)
					}
				}
			}
			if !fired {
				t.Fatalf("no trigger of %v fires on %q", trig, s.text)
			}
		})
	}
	if _, err := Family("nope").Triggers(); err == nil {
		t.Fatal("unknown family gave triggers")
	}
}

func TestUnknownFamily(t *testing.T) {
	if _, _, err := Parse("nope", "x", nil); err == nil {
		t.Fatal("Parse accepted an unknown family")
	}
	if _, err := NewStream("nope", nil); err == nil {
		t.Fatal("NewStream accepted an unknown family")
	}
}

func TestDefaultIDs(t *testing.T) {
	for _, c := range []struct {
		f    Family
		want string
	}{{Hermes, `^call_[0-9a-f]{24}$`}, {Generic, `^call_[0-9a-f]{24}$`}, {Mistral, `^[A-Za-z0-9]{9}$`}} {
		a, b := c.f.DefaultID()(0), c.f.DefaultID()(0)
		if a == b || !regexp.MustCompile(c.want).MatchString(a) || !regexp.MustCompile(c.want).MatchString(b) {
			t.Errorf("%s DefaultID gave %q and %q, want %s", c.f, a, b, c.want)
		}
	}
	_, calls, err := Parse(Mistral, `[TOOL_CALLS]f[ARGS]{}`, nil)
	if err != nil || len(calls) != 1 || !regexp.MustCompile(`^[A-Za-z0-9]{9}$`).MatchString(calls[0].ID) {
		t.Fatalf("Parse with a nil IDFunc: %v %v", calls, err)
	}
}

func TestStreamAfterClose(t *testing.T) {
	st, _ := NewStream(Hermes, seqID)
	if _, _, err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if c, d, err := st.Feed("more"); c != "" || d != nil || err != nil {
		t.Fatalf("Feed after Close = %q %v %v", c, d, err)
	}
}

// FuzzStream checks that any output, in any chunking, streams without a
// panic to exactly what Parse gives.
func FuzzStream(f *testing.F) {
	for _, s := range samples {
		for i, fam := range Families {
			if fam == s.family {
				f.Add(uint8(i), s.text, uint64(len(s.text)))
			}
		}
	}
	f.Fuzz(func(t *testing.T, fi uint8, text string, seed uint64) {
		fam := Families[int(fi)%len(Families)]
		wantContent, wantCalls, wantErr := Parse(fam, text, seqID)
		r := rand.New(rand.NewPCG(seed, 7))
		var chunks []string
		for rest := text; rest != ""; {
			n := 1 + r.IntN(min(len(rest), 16))
			chunks, rest = append(chunks, rest[:n]), rest[n:]
		}
		content, calls, err := reassemble(t, fam, chunks)
		if content != wantContent || !reflect.DeepEqual(calls, wantCalls) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%s chunks %q:\n got %q %q %v\nwant %q %q %v", fam, chunks, content, calls, err, wantContent, wantCalls, wantErr)
		}
	})
}
