package toolcall

import (
	"fmt"
	"strings"
)

// Family is a tool-call output format.
type Family string

// The families. Each names the format its models write calls in.
const (
	// Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
	// one block per call (Qwen2.5, Qwen3, QwQ, Hermes 2 Pro / 3, Granite 4),
	// or a JSON array of such objects in one block (Apriel). Other text
	// after <tool_call> (the XML forms of Qwen3-Coder or GLM) is content.
	Hermes Family = "hermes"
	// Llama3: a JSON object {"name": ..., "parameters": {...}} as the whole
	// output, or after <|python_tag|>; several separated by ";". A
	// built-in tool call <|python_tag|>name.call(key="value") is read too;
	// other code after <|python_tag|> (code_interpreter) is content.
	Llama3 Family = "llama3"
	// Mistral: [TOOL_CALLS] and a JSON array of {"name", "arguments"}
	// (Nemo), or [TOOL_CALLS]name[CALL_ID]id[ARGS]{...} per call
	// (Small 3.2, Devstral, Ministral 3; [CALL_ID] optional).
	Mistral Family = "mistral"
	// DeepSeek: <｜tool▁calls▁begin｜> and per call
	// <｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json\n{...}\n```<｜tool▁call▁end｜>
	// (R1) or <｜tool▁call▁begin｜>name<｜tool▁sep｜>{...}<｜tool▁call▁end｜> (V3.1).
	DeepSeek Family = "deepseek"
	// FunctionaryV31: <function=name>{...}</function>.
	FunctionaryV31 Family = "functionary-v3.1"
	// FunctionaryV32: ">>>recipient\n" segments; the generation prompt
	// ends with ">>>", so the output starts with a recipient. "all" is
	// content, any other recipient a call with JSON arguments.
	FunctionaryV32 Family = "functionary-v3.2"
	// CommandR: Action:\n```json\n[{"tool_name", "parameters"}]\n```
	// (Command R+) or <|START_ACTION|>[...]<|END_ACTION|> (Command R7B).
	CommandR Family = "command-r"
	// Granite: <|tool_call|>[{"name", "arguments"}] (Granite 3.x).
	Granite Family = "granite"
	// Generic is the fallback for templates whose tool format is none of
	// the above (or that have none): the system turn asks the model to
	// answer a call with exactly one JSON object as its whole output,
	//   {"tool_calls": [{"name": "f", "arguments": {...}}, ...]}
	// and any other output is content.
	Generic Family = "generic"
)

// Families lists every family.
var Families = []Family{Hermes, Llama3, Mistral, DeepSeek, FunctionaryV31, FunctionaryV32, CommandR, Granite, Generic}

// Detect recognises the family from a chat template's source, by the
// markup it renders assistant tool calls with. A template with no format
// of the list is Generic.
func Detect(template string) Family {
	has := func(s string) bool { return strings.Contains(template, s) }
	switch {
	case has(dsCallsBegin) || has(dsCallBegin):
		return DeepSeek
	case has("<|START_ACTION|>") || has("Action:") && has("```json") && has("tool_name"):
		return CommandR
	case has(">>>all"):
		return FunctionaryV32
	case has("<function=") && has("</function>") && !has("<parameter="):
		return FunctionaryV31
	case has("[TOOL_CALLS]"):
		return Mistral
	case has("<|tool_call|>"):
		return Granite
	case has("<tool_call>") && (has(`{"name"`) || has(`{\"name\"`)) && !has("<arg_key>") && !has("<parameter="):
		return Hermes
	case has("<|python_tag|>") || has("<|start_header_id|>") && has("ipython") && has(`"parameters"`) && !has("functools"):
		return Llama3
	}
	return Generic
}

// TriggerKind says how a Trigger matches.
type TriggerKind int

const (
	// TriggerWord: the literal text appears anywhere in the output.
	TriggerWord TriggerKind = iota
	// TriggerPatternFull: the regular expression matches the whole output
	// so far (it is anchored at both ends); its first group marks where
	// the call, and so the constrained text, begins. The patterns use the
	// syntax RE2 and ECMAScript share.
	TriggerPatternFull
)

// Trigger is what starts a call in a family's output: the point from
// which a lazy grammar constrains sampling.
type Trigger struct {
	Kind  TriggerKind
	Value string
}

// Triggers returns the family's call triggers.
func (f Family) Triggers() ([]Trigger, error) {
	sp, err := f.spec()
	if err != nil {
		return nil, err
	}
	var t []Trigger
	for _, m := range sp.markers {
		t = append(t, Trigger{Kind: TriggerWord, Value: m})
	}
	if sp.startPattern != "" {
		t = append(t, Trigger{Kind: TriggerPatternFull, Value: sp.startPattern})
	}
	return t, nil
}

// spec is how one family's output is read.
type spec struct {
	family  Family
	markers []string
	// section reads the call section at s[i], where marker m begins.
	section func(sc *scanner, i int, m string) (int, status)
	// start, when set, reads a call section that only the start of the
	// output can hold (after whitespace when startSkipsWS).
	start        func(sc *scanner, i int) (int, status)
	startSkipsWS bool
	startPattern string
}

func (f Family) spec() (*spec, error) {
	sp, ok := specs[f]
	if !ok {
		return nil, fmt.Errorf("toolcall: unknown family %q", string(f))
	}
	return sp, nil
}

// nextMarker finds the first complete marker at or after i (the longest at
// the same index).
func (sp *spec) nextMarker(s string, i int) (int, string) {
	best, bm := -1, ""
	for _, m := range sp.markers {
		k := strings.Index(s[i:], m)
		if k < 0 {
			continue
		}
		if best < 0 || i+k < best || i+k == best && len(m) > len(bm) {
			best, bm = i+k, m
		}
	}
	return best, bm
}

// heldPrefix is the length of the longest suffix of tail that is a proper
// prefix of a marker.
func (sp *spec) heldPrefix(tail string) int {
	n := 0
	for _, m := range sp.markers {
		for k := min(len(m)-1, len(tail)); k > n; k-- {
			if strings.HasSuffix(tail, m[:k]) {
				n = k
				break
			}
		}
	}
	return n
}

const (
	dsCallsBegin = "<｜tool▁calls▁begin｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsSep        = "<｜tool▁sep｜>"
)

// nameBad are the bytes a name written outside JSON cannot hold.
const nameBad = " \t\r\n<>[]{}\"'`"

var specs = map[Family]*spec{
	Hermes: {
		family:  Hermes,
		markers: []string{"<tool_call>"},
		section: func(sc *scanner, i int, m string) (int, status) {
			i = skipWS(sc.s, i+len(m))
			if i >= len(sc.s) {
				return i, stMore
			}
			var st status
			switch sc.s[i] {
			case '{':
				i, st = sc.callObject(i, keysOpenAI)
			case '[':
				i, st = sc.callArray(i, keysOpenAI)
			default:
				return i, stNo
			}
			if st != stOK {
				return i, st
			}
			return sc.closing(i, "</tool_call>")
		},
	},
	Llama3: {
		family:  Llama3,
		markers: []string{"<|python_tag|>"},
		section: func(sc *scanner, i int, m string) (int, status) {
			i = skipWS(sc.s, i+len(m))
			if i >= len(sc.s) {
				return i, stMore
			}
			if sc.s[i] == '{' {
				return sc.llamaObjects(i)
			}
			return sc.builtinCall(i)
		},
		start: func(sc *scanner, i int) (int, status) {
			if _, st := objectKey(sc.s, i, "name", "type"); st != stOK {
				return i, st
			}
			return sc.llamaObjects(i)
		},
		startSkipsWS: true,
		startPattern: `\s*(\{\s*"(?:name|type)")[\s\S]*`,
	},
	Mistral: {
		family:  Mistral,
		markers: []string{"[TOOL_CALLS]"},
		section: func(sc *scanner, i int, m string) (int, status) {
			s := sc.s
			i = skipWS(s, i+len(m))
			if i >= len(s) {
				return i, stMore
			}
			if s[i] == '[' {
				return sc.callArray(i, keysOpenAI)
			}
			name, j, st := until(s, i, "[", nameBad)
			if st != stOK {
				return j, st
			}
			k, st := lit(s, j-1, "[CALL_ID]")
			switch st {
			case stMore:
				return k, st
			case stOK:
				if _, j, st = until(s, k, "[ARGS]", " \t\r\n<>{}\"'`"); st != stOK {
					return j, badIfNo(st)
				}
			default:
				if j, st = lit(s, j-1, "[ARGS]"); st != stOK {
					return j, st
				}
			}
			sc.named(name)
			return sc.args(skipWS(s, j))
		},
	},
	DeepSeek: {
		family:  DeepSeek,
		markers: []string{dsCallsBegin, dsCallBegin},
		section: deepseekSection,
	},
	FunctionaryV31: {
		family:  FunctionaryV31,
		markers: []string{"<function="},
		section: func(sc *scanner, i int, m string) (int, status) {
			name, j, st := until(sc.s, i+len(m), ">", nameBad)
			if st != stOK {
				return j, st
			}
			sc.named(name)
			j, st = sc.args(skipWS(sc.s, j))
			if st != stOK {
				return j, st
			}
			return sc.closing(j, "</function>")
		},
	},
	FunctionaryV32: {
		family:  FunctionaryV32,
		markers: []string{">>>"},
		section: func(sc *scanner, i int, m string) (int, status) {
			return sc.recipient(i + len(m))
		},
		start:        func(sc *scanner, i int) (int, status) { return sc.recipient(i) },
		startPattern: `([A-Za-z0-9_.\-]+\n\{)[\s\S]*`,
	},
	CommandR: {
		family:  CommandR,
		markers: []string{"<|START_ACTION|>", "Action:"},
		section: func(sc *scanner, i int, m string) (int, status) {
			s := sc.s
			i = skipWS(s, i+len(m))
			closer := "<|END_ACTION|>"
			if m == "Action:" {
				if i >= len(s) {
					return i, stMore
				}
				j, st := lit(s, i, "```json")
				if st != stOK {
					return j, st
				}
				i, closer = skipWS(s, j), "```"
			}
			i, st := sc.callArray(i, keysCommand)
			if st != stOK {
				return i, st
			}
			return sc.closing(i, closer)
		},
	},
	Granite: {
		family:  Granite,
		markers: []string{"<|tool_call|>"},
		section: func(sc *scanner, i int, m string) (int, status) {
			return sc.callArray(skipWS(sc.s, i+len(m)), keysOpenAI)
		},
	},
	Generic: {
		family: Generic,
		start: func(sc *scanner, i int) (int, status) {
			j, st := objectKey(sc.s, i, "tool_calls")
			if st != stOK {
				return j, st
			}
			i, st = sc.callArray(j, keysOpenAI)
			if st != stOK {
				return i, st
			}
			return sc.closing(i, "}")
		},
		startSkipsWS: true,
		startPattern: `\s*(\{\s*"tool_calls")[\s\S]*`,
	},
}

// objectKey matches `{ "key" :` at s[i] for one of the keys and returns
// the index of the value.
func objectKey(s string, i int, want ...string) (int, status) {
	if i >= len(s) {
		return i, stMore
	}
	if s[i] != '{' {
		return i, stNo
	}
	i = skipWS(s, i+1)
	if i >= len(s) {
		return i, stMore
	}
	if s[i] != '"' {
		return i, stNo
	}
	for _, k := range want {
		q := `"` + k + `"`
		j, st := lit(s, i, q)
		switch st {
		case stMore:
			return j, stMore
		case stOK:
			j = skipWS(s, j)
			if j >= len(s) {
				return j, stMore
			}
			if s[j] != ':' {
				return j, stNo
			}
			return skipWS(s, j+1), stOK
		}
	}
	return i, stNo
}

// llamaObjects reads call objects separated by ";".
func (sc *scanner) llamaObjects(i int) (int, status) {
	s := sc.s
	for {
		j, st := sc.callObject(i, keysLlama)
		if st != stOK {
			return j, st
		}
		k := skipWS(s, j)
		if k >= len(s) {
			if sc.final {
				return j, stOK
			}
			return k, stMore
		}
		if s[k] != ';' {
			return j, stOK
		}
		i = skipWS(s, k+1)
	}
}

// recipient reads a functionary v3.2 segment after ">>>".
func (sc *scanner) recipient(i int) (int, status) {
	s := sc.s
	name, j, st := until(s, i, "\n", nameBad)
	if st != stOK {
		return j, st
	}
	if name == "all" {
		return j, stOK
	}
	if j >= len(s) {
		return j, stMore
	}
	if s[j] != '{' {
		return j, stNo
	}
	sc.named(name)
	return sc.args(j)
}

// deepseekSection reads calls up to <｜tool▁calls▁end｜>. A later
// <｜tool▁call▁begin｜> that does not begin a call ends the section: it and
// what follows are content.
func deepseekSection(sc *scanner, i int, m string) (int, status) {
	s := sc.s
	if m == dsCallsBegin {
		i = skipWS(s, i+len(m))
	}
	first := true
	prevEnd := i
	for {
		j, st := deepseekCall(sc, i)
		if st == stNo && !first {
			return prevEnd, stOK
		}
		if st != stOK {
			return j, st
		}
		first, prevEnd = false, j
		k := skipWS(s, j)
		if k >= len(s) {
			if sc.final {
				return j, stOK
			}
			return k, stMore
		}
		if _, st := lit(s, k, dsCallBegin); st != stNo {
			i = k
			continue
		}
		if e, st := lit(s, k, dsCallsEnd); st != stNo {
			return e, st
		}
		return j, stOK
	}
}

// deepseekCall reads one <｜tool▁call▁begin｜>...<｜tool▁call▁end｜>; it is
// stNo only before the call is named.
func deepseekCall(sc *scanner, i int) (int, status) {
	s := sc.s
	j, st := lit(s, i, dsCallBegin)
	if st != stOK {
		return j, st
	}
	kind, j, st := until(s, j, dsSep, " \t\r\n")
	if st != stOK {
		return j, st
	}
	if kind == "function" {
		var name string
		if name, j, st = until(s, j, "\n", " \t\r<>"); st != stOK {
			return j, st
		}
		if j, st = lit(s, skipWS(s, j), "```json"); st != stOK {
			return j, badIfNo(st)
		}
		sc.named(name)
		if j, st = sc.args(skipWS(s, j)); st != stOK {
			return j, st
		}
		if j, st = sc.closing(j, "```"); st != stOK {
			return j, st
		}
	} else {
		sc.named(kind)
		if j, st = sc.args(skipWS(s, j)); st != stOK {
			return j, st
		}
	}
	return sc.closing(j, dsCallEnd)
}

func badIfNo(st status) status {
	if st == stNo {
		return stBad
	}
	return st
}
