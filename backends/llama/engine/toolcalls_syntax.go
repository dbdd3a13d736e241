package engine

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/modeld/modeld/backends/toolcall"
)

// callSyntax returns the body of the root rule of fam's call section as
// tmpl writes calls, over n tools of the daemon's call grammar (its rules
// tool-call, the alternatives of the call objects, and call-fname-<i>,
// call-args-<i> per tool: backends/llama/grammar.ToolCall), with the new
// definitions of the call object's key rules where the family's keys
// differ. Under lazy the body is the section from the trigger on: the
// marker, or for a start pattern the call. false: no call syntax for fam.
//
// The syntaxes, each what the family's parser (backends/toolcall) reads:
//
//   - Hermes: <tool_call>\n{"name", "arguments"}</tool_call> blocks, "\n"
//     between.
//   - Llama3: one {"name", "parameters"} object (the format has no
//     parallel calls); under lazy after an optional <|python_tag|>.
//   - Mistral: [TOOL_CALLS] and a JSON array of {"name", "arguments"}
//     (Nemo); [TOOL_CALLS]name[ARGS]{...} per call when the template
//     writes [ARGS] (Small 3.2, Devstral, Ministral 3).
//   - DeepSeek: <｜tool▁calls▁begin｜>, per call <｜tool▁call▁begin｜>
//     function<｜tool▁sep｜>name\n```json\n{...}\n```<｜tool▁call▁end｜>
//     ("\n" between) when the template writes ```json (R1), else
//     <｜tool▁call▁begin｜>name<｜tool▁sep｜>{...}<｜tool▁call▁end｜> (V3.1),
//     then <｜tool▁calls▁end｜>.
//   - FunctionaryV31: <function=name>{...}</function> per call.
//   - FunctionaryV32: name\n{...}, ">>>" between (the generation prompt
//     ends with ">>>"); under lazy after an optional ">>>".
//   - CommandR: <|START_ACTION|>[{"tool_name", "parameters"}, ...]<|END_ACTION|>
//     when the template writes <|START_ACTION|> (R7B), else
//     Action:\n```json\n[...]\n``` (R+).
//   - Granite: <|tool_call|>[{"name", "arguments"}, ...].
//   - Generic: {"tool_calls": [{"name", "arguments"}, ...]}.
func callSyntax(fam toolcall.Family, tmpl string, n int, single, lazy bool) (string, map[string]string, bool) {
	if n == 0 {
		return "", nil, false
	}
	// rep is x, or x then more x with sep before each.
	rep := func(x, sep string) string {
		if single {
			return x
		}
		if sep == "" {
			return x + "+"
		}
		return x + " (" + sep + " " + x + ")*"
	}
	// named is the alternatives of per-tool sequences, f(i) the one of tool i.
	named := func(f func(i int) string) string {
		alts := make([]string, n)
		for i := range alts {
			alts[i] = "(" + f(i) + ")"
		}
		return "(" + strings.Join(alts, " | ") + ")"
	}
	array := rep("tool-call", `"," space`)
	switch fam {
	case toolcall.Hermes:
		return rep(`("<tool_call>" "\n" tool-call "</tool_call>")`, `"\n"`), nil, true
	case toolcall.Generic:
		return `"{" space "\"tool_calls\"" space ":" space "[" space ` + array + ` "]" space "}" space`, nil, true
	case toolcall.Llama3:
		body := "tool-call" // one call an answer: the format has no parallel calls
		if lazy {
			body = `"<|python_tag|>"? ` + body
		}
		return body, map[string]string{"call-args-key": `"\"parameters\""`}, true
	case toolcall.Mistral:
		if strings.Contains(tmpl, "[ARGS]") {
			return rep(named(func(i int) string {
				return fmt.Sprintf(`"[TOOL_CALLS]" call-fname-%d "[ARGS]" call-args-%d`, i, i)
			}), ""), nil, true
		}
		return `"[TOOL_CALLS]" "[" space ` + array + ` "]" space`, nil, true
	case toolcall.DeepSeek:
		if strings.Contains(tmpl, "```json") {
			call := named(func(i int) string {
				return fmt.Sprintf(`"<｜tool▁call▁begin｜>function<｜tool▁sep｜>" call-fname-%d "\n`+"```json"+`\n" call-args-%d "\n`+"```"+`<｜tool▁call▁end｜>"`, i, i)
			})
			return `"<｜tool▁calls▁begin｜>" ` + rep(call, `"\n"`) + ` "<｜tool▁calls▁end｜>"`, nil, true
		}
		call := named(func(i int) string {
			return fmt.Sprintf(`"<｜tool▁call▁begin｜>" call-fname-%d "<｜tool▁sep｜>" call-args-%d "<｜tool▁call▁end｜>"`, i, i)
		})
		return `"<｜tool▁calls▁begin｜>" ` + rep(call, "") + ` "<｜tool▁calls▁end｜>"`, nil, true
	case toolcall.FunctionaryV31:
		return rep(named(func(i int) string {
			return fmt.Sprintf(`"<function=" call-fname-%d ">" call-args-%d "</function>"`, i, i)
		}), ""), nil, true
	case toolcall.FunctionaryV32:
		body := rep(named(func(i int) string {
			return fmt.Sprintf(`call-fname-%d "\n" call-args-%d`, i, i)
		}), `">>>"`)
		if lazy {
			body = `">>>"? ` + body
		}
		return body, nil, true
	case toolcall.CommandR:
		keys := map[string]string{"call-name-key": `"\"tool_name\""`, "call-args-key": `"\"parameters\""`}
		if strings.Contains(tmpl, "<|START_ACTION|>") {
			return `"<|START_ACTION|>" "[" space ` + array + ` "]" space "<|END_ACTION|>"`, keys, true
		}
		return `"Action:" "\n` + "```json" + `\n" "[" space ` + array + ` "]" space "` + "```" + `"`, keys, true
	case toolcall.Granite:
		return `"<|tool_call|>" "[" space ` + array + ` "]" space`, nil, true
	}
	return "", nil, false
}

// toolCount is the number of tools in the daemon's call grammar g.
func toolCount(g string) int {
	n := 0
	for strings.Contains(g, fmt.Sprintf("\ncall-%d ::= ", n)) {
		n++
	}
	return n
}

// setRule replaces the definition of rule name in the GBNF rules (one rule
// a line) with body.
func setRule(rules, name, body string) string {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` ::= .*$`)
	return re.ReplaceAllLiteralString(rules, name+" ::= "+body)
}
