// Package chattmpltest holds the fidelity tests' shared parts: the
// conversation shapes every real chat template is rendered with, and the
// reference renderer (scripts/template-oracle, Debian's python3-jinja2 set
// up as Hugging Face transformers sets it up). Tests only.
package chattmpltest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/chattmpl"
	"github.com/modeld/modeld/internal/jinja"
	"github.com/modeld/modeld/internal/testenv"
)

// FixedNow is the clock both renderers' strftime_now read.
var FixedNow = time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)

// Conversation is one shape of the fidelity test.
type Conversation struct {
	Name  string
	Input chattmpl.Input
}

// WeatherTool is a described tool whose parameters' keys are out of
// sorted order.
var WeatherTool = backends.Tool{
	Name:        "get_weather",
	Description: "Get the weather & <temperature> for a city",
	// Keys out of sorted order, so a renderer that sorts them differs.
	Parameters: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string", "description": "The city, e.g. Zürich"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}`),
}

// AddTool has no descriptions, as many clients send tools.
var AddTool = backends.Tool{
	Name:       "add",
	Parameters: json.RawMessage(`{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}`),
}

// Conversations are the shapes every template is rendered with.
func Conversations() []Conversation {
	u := func(s string) backends.Message { return backends.Message{Role: "user", Content: s} }
	a := func(s string) backends.Message { return backends.Message{Role: "assistant", Content: s} }
	sys := func(s string) backends.Message { return backends.Message{Role: "system", Content: s} }
	call := backends.Message{Role: "assistant", ToolCalls: []backends.ToolCall{{ID: "a1b2c3d4e", Name: "get_weather", Arguments: `{"city": "Paris", "unit": "c"}`}}}
	result := backends.Message{Role: "tool", ToolCallID: "a1b2c3d4e", Name: "get_weather", Content: `{"temperature": 21, "sky": "clear"}`}
	c := []Conversation{
		{"single_user", chattmpl.Input{Messages: []backends.Message{u("Hello there")}}},
		{"system_user", chattmpl.Input{Messages: []backends.Message{sys("You are a terse assistant."), u("Hello there")}}},
		{"multi_turn", chattmpl.Input{Messages: []backends.Message{u("Hi"), a("Hello! How can I help?"), u("What is 2+2?"), a("4."), u("Thanks")}}},
		{"mid_system", chattmpl.Input{Messages: []backends.Message{u("Hi"), a("Hello!"), sys("Answer in French from now on."), u("How are you?")}}},
		{"tool_call_result", chattmpl.Input{Messages: []backends.Message{u("What is the weather in Paris?"), call, result}, Tools: []backends.Tool{WeatherTool}}},
		{"tools_present", chattmpl.Input{Messages: []backends.Message{sys("You can call tools."), u("What is the weather in Paris?")}, Tools: []backends.Tool{WeatherTool}}},
		{"tools_undescribed", chattmpl.Input{Messages: []backends.Message{u("Add 2 and 3.")}, Tools: []backends.Tool{AddTool}}},
		{"past_reasoning", chattmpl.Input{Messages: []backends.Message{u("What is 17*3?"), {Role: "assistant", Content: "51", Reasoning: "17*3 = 51, since 17*3 = 10*3 + 7*3."}, u("And 17*4?")}}},
		{"non_ascii_html", chattmpl.Input{Messages: []backends.Message{sys("Réponds en français — «toujours»."), u("Grüße, 你好 🌍! Is 3 < 5 && 5 > 3? Use <b>bold</b> & \"quotes\".")}}},
		{"no_generation_prompt", chattmpl.Input{Messages: []backends.Message{u("Hi"), a("Hello!")}}},
	}
	for i := range c {
		c[i].Input.AddGenerationPrompt = c[i].Name != "no_generation_prompt"
		c[i].Input.BOS, c[i].Input.EOS = "<s>", "</s>"
		c[i].Input.Now = func() time.Time { return FixedNow }
	}
	return c
}

// OracleCase is one rendering asked of the reference.
type OracleCase struct {
	ID       string
	Template string // a key of the templates given to Oracle
	Vars     map[string]any
}

// OracleResult is the reference's rendering, or its error.
type OracleResult struct {
	ID     string `json:"id"`
	Text   string `json:"text"`
	Error  string `json:"error"`
	Raised bool   `json:"raised"` // the template called raise_exception
}

// Oracle renders cases with Debian's python3-jinja2 set up as Hugging Face
// transformers sets it up (scripts/template-oracle/oracle.py).
func Oracle(t testing.TB, templates map[string]string, cases []OracleCase) map[string]OracleResult {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "template-oracle", "oracle.py")
	if out, err := exec.Command("python3", "-c", "import jinja2").CombinedOutput(); err != nil {
		t.Fatalf("the reference Jinja engine is missing (python3-jinja2; make test installs it with apt-get): %v: %s", err, out)
	}
	type wireCase struct {
		ID       string `json:"id"`
		Template string `json:"template"`
		Vars     json.RawMessage
	}
	var b strings.Builder
	b.WriteString(`{"now": "` + FixedNow.Format("2006-01-02T15:04:05") + `", "templates": `)
	tj, _ := json.Marshal(templates)
	b.Write(tj)
	b.WriteString(`, "cases": [`)
	for i, c := range cases {
		vars := c.Vars
		m := jinja.NewMap()
		keys := make([]string, 0, len(vars))
		for k := range vars {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m.Set(k, vars[k])
		}
		vj, err := jinja.ToJSON(m, nil, false)
		if err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		id, _ := json.Marshal(c.ID)
		name, _ := json.Marshal(c.Template)
		b.WriteString(`{"id": ` + string(id) + `, "template": ` + string(name) + `, "vars": ` + vj + `}`)
	}
	b.WriteString("]}")
	cmd := exec.Command("python3", script)
	cmd.Stdin = strings.NewReader(b.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference renderer: %v: %s", err, stderr.String())
	}
	var res []OracleResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("reference renderer output: %v", err)
	}
	m := map[string]OracleResult{}
	for _, r := range res {
		m[r.ID] = r
	}
	return m
}

// RealTemplates reads the real chat templates of the test assets.
func RealTemplates(t testing.TB) map[string]string {
	t.Helper()
	dir := filepath.Join(testenv.LlamaAssets(t), "templates")
	paths, err := filepath.Glob(filepath.Join(dir, "*.jinja"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no chat templates in %s: %v", dir, err)
	}
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".jinja")] = string(b)
	}
	return out
}
