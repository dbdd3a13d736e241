package api

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/engine"
	"github.com/modeld/modeld/internal/testenv"
)

// TestToolBytesUnderEveryTemplate checks the early bound's count of tools
// against the real chat templates, rendered by the llama engine as a chat
// is: for each of the 68 reference templates that shows the tools, the
// tokens they add to the prompt are at least the ⌈count / 256⌉ the bound
// takes them for, and the bytes they add are at least a quarter of the
// count (JSON renderings add more than the count, since it leaves out the
// punctuation; Functionary's, Apertus' and Gemma 4's own forms drop some
// of the schema's keywords), so that a refusal needs tokens of 64 bytes on
// average, beyond any real vocabulary. Templates that show no tools are
// listed (docs/SECURITY.md names the case).
func TestToolBytesUnderEveryTemplate(t *testing.T) {
	if err := engine.Init(testenv.LlamaDir(t)); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(testenv.LlamaAssets(t), "templates"))
	if err != nil {
		t.Fatal(err)
	}
	params := func(s string) json.RawMessage { return json.RawMessage(s) }
	tools := []backends.Tool{
		{Name: "get_weather", Description: "Get the current weather for a city, in the unit asked for.", Parameters: params(
			`{"type":"object","properties":{"city":{"type":"string","description":"The city, e.g. Paris"},"unit":{"type":"string","enum":["celsius","fahrenheit"],"description":"The unit of the temperature"}},"required":["city"]}`)},
		{Name: "search_files", Description: "Search the workspace for files whose text matches a pattern.", Parameters: params(
			`{"type":"object","properties":{"pattern":{"type":"string","description":"A regular expression"},"paths":{"type":"array","items":{"type":"string"},"description":"Folders to search"},"limit":{"type":"integer","description":"At most this many results"}},"required":["pattern"],"additionalProperties":false}`)},
		{Name: "todo_write", Description: "Replace the task list.", Parameters: params(
			`{"type":"object","properties":{"todos":{"type":"array","description":"The tasks","items":{"type":"object","properties":{"content":{"type":"string","description":"What to do"},"status":{"type":"string","enum":["pending","in_progress","completed"]}},"required":["content","status"]}}},"required":["todos"]}`)},
	}
	counted := core.ToolPromptBytes(tools)
	msgs := []backends.Message{{Role: "user", Content: "What is the weather in Paris?"}}
	var shown, hidden, failed []string
	least, leastName := 1<<30, ""
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".jinja")
		if !ok {
			continue
		}
		m, err := engine.Open(testenv.LlamaChatModel(t, "gpt-2", name), engine.Options{Slots: 1, ContextSize: 4096})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		render := func(tools []backends.Tool) ([]int32, string, error) {
			ids, err := m.ChatPrompt(msgs, tools, true)
			if err != nil {
				return nil, "", err
			}
			s, err := m.Detokenize(ids, true)
			return ids, s, err
		}
		idsWith, with, errWith := render(tools)
		idsWithout, without, errWithout := render(nil)
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		switch {
		case errWith != nil || errWithout != nil:
			failed = append(failed, name)
			t.Logf("%s does not render here: %v / %v", name, errWith, errWithout)
			continue
		case !strings.Contains(with, "get_weather"):
			hidden = append(hidden, name)
			continue
		}
		shown = append(shown, name)
		bytes, tokens := len(with)-len(without), len(idsWith)-len(idsWithout)
		if tokens < core.MinPromptTokens(counted) || 4*bytes < counted {
			t.Errorf("%s: the tools add %d bytes and %d tokens to the prompt; %d bytes are counted, taken for at least %d tokens", name, bytes, tokens, counted, core.MinPromptTokens(counted))
		}
		if bytes < least {
			least, leastName = bytes, name
		}
	}
	t.Logf("%d bytes counted; %d templates show the tools (the fewest bytes they add: %d, %s), %d do not (%v), %d do not render (%v)",
		counted, len(shown), least, leastName, len(hidden), hidden, len(failed), failed)
	if len(shown) < 55 {
		t.Errorf("only %d templates show the tools", len(shown))
	}
}
