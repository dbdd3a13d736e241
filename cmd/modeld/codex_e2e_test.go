package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends/llama/grammar/lark"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

// codexFixtures are the Responses requests shaped as Codex sends them
// (api/testdata/responses: an unknown model id, and a catalog id with a
// custom apply_patch tool under a Lark grammar of modeld's own).
var codexFixtures = filepath.Join("..", "..", "api", "testdata", "responses")

// codexModel writes a random-weight model with Qwen2.5's real vocabulary
// and template whose weights favour the tokens that end a patch's lines
// and sections and the turn, so that sampled freeform calls finish well
// inside the token limit; which text they hold is the grammar's and the
// weights' chance.
func codexModel(t *testing.T, seed uint64) string {
	t.Helper()
	v, err := ggufgen.ReadVocab(testenv.LlamaVocab(t, "qwen2"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(testenv.LlamaTemplate(t, "Qwen-Qwen2.5-7B-Instruct"))
	if err != nil {
		t.Fatal(err)
	}
	raise := map[int]float32{}
	for piece, lift := range map[string]float32{`\n`: 24, "===": 21, "ĠEND": 22, "END": 20, "<|im_end|>": 28} {
		id := v.ID(piece)
		if id < 0 {
			t.Fatalf("the qwen2 vocabulary has no token %q", piece)
		}
		raise[id] = lift
	}
	path := filepath.Join(t.TempDir(), "codex.gguf")
	if err := ggufgen.WriteVocabModelFile(path, v, ggufgen.Options{Type: ggufgen.F16, Template: string(tmpl), Context: 8192, Seed: seed, Raise: raise}); err != nil {
		t.Fatal(err)
	}
	return path
}

// codexRequest is a fixture with fields set.
func codexRequest(t *testing.T, name string, set map[string]any) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(codexFixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	for k, x := range set {
		v[k] = x
	}
	return v
}

// postResponses sends body to /v1/responses and returns the response
// object: the body, or the final event's response when streamed, with the
// custom_tool_call_input deltas joined.
func postResponses(t *testing.T, base string, body map[string]any) (resp map[string]any, deltas string) {
	t.Helper()
	b, _ := json.Marshal(body)
	r, err := http.Post(base+"/v1/responses", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if r.StatusCode != 200 {
		msg, _ := io.ReadAll(r.Body)
		t.Fatalf("status %d: %s", r.StatusCode, msg)
	}
	if body["stream"] != true {
		if err := json.NewDecoder(r.Body).Decode(&resp); err != nil {
			t.Fatal(err)
		}
		return resp, ""
	}
	var d strings.Builder
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		switch ev["type"] {
		case "response.custom_tool_call_input.delta":
			d.WriteString(ev["delta"].(string))
		case "response.completed", "response.incomplete", "response.failed":
			resp = ev["response"].(map[string]any)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if resp == nil {
		t.Fatal("the stream ended without a final response event")
	}
	return resp, d.String()
}

func outputItems(t *testing.T, resp map[string]any) []map[string]any {
	t.Helper()
	var items []map[string]any
	for _, it := range resp["output"].([]any) {
		items = append(items, it.(map[string]any))
	}
	return items
}

// TestCodexShapedRequestsAgainstDaemon: requests shaped as Codex's, through
// the daemon and the runner, on random-weight models with Qwen2.5's real
// vocabulary and template. A forced apply_patch (tool_choice {type:
// "custom"}) is one custom_tool_call; every one that ends within the token
// limit (at least half of them, over two models and three seeds) has an
// input that parses under the tool's Lark grammar, read by lark.Match from
// the grammar's text: only the grammar makes random weights write a patch.
// With one seed, the stream's input deltas join to the input and its final
// response equals the one returned whole; the next turn takes
// custom_tool_call and custom_tool_call_output. The unknown-id request (its
// namespace group and web_search, dropped) works, and a forced call of a
// namespace's function goes back with name and namespace apart and is taken
// back in the next turn.
func TestCodexShapedRequestsAgainstDaemon(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home}
	models := []string{"t/codex1", "t/codex2"}
	for i, id := range models {
		if out, err := runCLI(t, env, "import", codexModel(t, uint64(i+1)), "--name", id); err != nil {
			t.Fatalf("import: %v\n%s", err, out)
		}
	}
	_, base, logs := startDaemon(t, home, "--context-size", "8192")
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	}()
	catalog := codexRequest(t, "codex-catalog-model.json", nil)
	var def string
	for _, tool := range catalog["tools"].([]any) {
		if m := tool.(map[string]any); m["type"] == "custom" {
			def = m["format"].(map[string]any)["definition"].(string)
		}
	}
	g, err := lark.Parse(def)
	if err != nil {
		t.Fatal(err)
	}
	force := map[string]any{"type": "custom", "name": "apply_patch"}
	completed := 0
	for _, model := range models {
		for seed := 2; seed <= 4; seed++ {
			resp, _ := postResponses(t, base, codexRequest(t, "codex-catalog-model.json", map[string]any{
				"model": model, "stream": false, "tool_choice": force, "parallel_tool_calls": false, "max_output_tokens": 1000,
				"temperature": 1, "seed": seed}))
			items := outputItems(t, resp)
			if len(items) != 1 || items[0]["type"] != "custom_tool_call" || items[0]["name"] != "apply_patch" {
				t.Fatalf("%s seed %d: output %v", model, seed, items)
			}
			input := items[0]["input"].(string)
			switch resp["status"] {
			case "completed":
				completed++
				if !g.Match(input) {
					t.Fatalf("%s seed %d: the Lark grammar rejects the input %q", model, seed, input)
				}
			case "incomplete":
				// random weights wandered past the token limit inside the patch
				t.Logf("%s seed %d: cut at max_output_tokens after %d bytes", model, seed, len(input))
			default:
				t.Fatalf("%s seed %d: status %v", model, seed, resp["status"])
			}
		}
	}
	if completed < 3 {
		t.Fatalf("only %d of 6 forced calls ended within the token limit", completed)
	}
	// the same seed streamed and whole agree
	same := map[string]any{"model": models[0], "tool_choice": force, "parallel_tool_calls": false, "max_output_tokens": 1000, "temperature": 1, "seed": 2}
	same["stream"] = false
	whole, _ := postResponses(t, base, codexRequest(t, "codex-catalog-model.json", same))
	same["stream"] = true
	streamed, deltas := postResponses(t, base, codexRequest(t, "codex-catalog-model.json", same))
	w, s := outputItems(t, whole), outputItems(t, streamed)
	for _, items := range [][]map[string]any{w, s} {
		for _, it := range items {
			delete(it, "id")
			delete(it, "call_id")
		}
	}
	if !reflect.DeepEqual(w, s) || len(w) == 0 {
		t.Fatalf("streamed output %v\nwhole output %v", s, w)
	}
	var inputs strings.Builder
	for _, it := range s {
		inputs.WriteString(it["input"].(string))
	}
	if deltas != inputs.String() {
		t.Fatalf("input deltas %q, inputs %q", deltas, inputs.String())
	}
	// turn 2: the patch's result
	call := outputItems(t, whole)[0]
	turn2 := codexRequest(t, "codex-catalog-model.json", map[string]any{"model": models[0], "stream": false, "max_output_tokens": 30})
	turn2["input"] = append(turn2["input"].([]any),
		map[string]any{"type": "custom_tool_call", "id": "ctc_1", "status": "completed", "call_id": "call_1", "name": "apply_patch", "input": call["input"]},
		map[string]any{"type": "custom_tool_call_output", "id": "ctco_1", "call_id": "call_1", "output": "Success. Updated the following files:\nA x.txt\n"})
	if resp, _ := postResponses(t, base, turn2); resp["status"] != "completed" && resp["status"] != "incomplete" {
		t.Fatalf("turn 2: %v", resp)
	}

	// the unknown-id shape: a forced call of a namespace's function
	unknown := codexRequest(t, "codex-unknown-model.json", map[string]any{"model": models[0], "stream": true, "max_output_tokens": 600, "parallel_tool_calls": false, "seed": 3,
		"tool_choice": map[string]any{"type": "function", "name": "close_agent", "namespace": "multi_agent_v1"}})
	resp, _ := postResponses(t, base, unknown)
	items := outputItems(t, resp)
	if len(items) == 0 || items[0]["type"] != "function_call" || items[0]["name"] != "close_agent" || items[0]["namespace"] != "multi_agent_v1" {
		t.Fatalf("namespaced call: %v", items)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(items[0]["arguments"].(string)), &args); resp["status"] == "completed" && (err != nil || args["target"] == nil) {
		t.Fatalf("arguments %q: %v", items[0]["arguments"], err)
	}
	next := codexRequest(t, "codex-unknown-model.json", map[string]any{"model": models[0], "stream": false, "max_output_tokens": 30})
	next["input"] = append(next["input"].([]any),
		map[string]any{"type": "function_call", "id": "fc_1", "status": "completed", "call_id": items[0]["call_id"], "name": "close_agent",
			"namespace": "multi_agent_v1", "arguments": items[0]["arguments"]},
		map[string]any{"type": "function_call_output", "call_id": items[0]["call_id"], "output": "closed"})
	if resp, _ := postResponses(t, base, next); resp["status"] != "completed" && resp["status"] != "incomplete" {
		t.Fatalf("namespaced turn 2: %v", resp)
	}
}
