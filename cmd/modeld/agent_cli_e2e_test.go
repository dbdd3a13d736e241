package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends/llama/grammar/lark"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

// The real agent CLIs, unmodified and pinned in clients/ (make
// test-clients), against a daemon on a random-weight model with Qwen2.5's
// real vocabulary and template, a 32k context and answers that end
// (testenv.LlamaAgentModel). Each CLI gets the settings modeld launch gives
// it, in a fresh home, through a recording proxy; the test checks that turn
// 1 completes, that turn 2 completes with at least 95% of its prompt read
// from the prefix cache (the daemon's access line), and that the CLI's
// requests have the shape recorded in testdata/agent_cli_requests.json
// (a field or tool type new in another version fails, named). The time of
// each turn is logged: docs/API.md quotes them.

// minCachedShare is the share of turn 2's prompt that must come from the
// prefix cache: everything but the turn's new messages.
const minCachedShare = 0.95

// checkTurn2Cache fails unless the largest request of a second turn read at
// least minCachedShare of its prompt from the prefix cache.
func checkTurn2Cache(t *testing.T, cli string, lines []accessLine, route string) accessLine {
	t.Helper()
	l := largest(t, lines, route)
	if float64(l.Cached) < minCachedShare*float64(l.Prompt) {
		t.Errorf("%s turn 2: %d of %d prompt tokens read from the prefix cache, want at least %.0f%%", cli, l.Cached, l.Prompt, 100*minCachedShare)
	}
	return l
}

// agentDaemonArgs start the daemon as a user would, but for the slots and
// with the aliases of Codex's catalog id and Claude Code's tiers: the
// default context (the model's trained 32k, capped by memory) must hold the
// CLIs' prompts.
var agentDaemonArgs = []string{"--chat-slots", "2", "--model-aliases", "gpt-5.5=t/agent,claude-*=t/agent"}

func TestAgentModelEndsItsTurns(t *testing.T) {
	_, base := realDaemonWith(t, testenv.LlamaAgentModel(t, agentModel.arch, agentModel.template), agentModel.id, agentDaemonArgs...)
	lengths := map[int]bool{}
	for i := range 8 {
		var res struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		postJSONTo(t, base+"/v1/chat/completions", map[string]any{
			"model": agentModel.id, "max_tokens": 1500, "temperature": 1, "seed": i,
			"messages": []map[string]any{{"role": "user", "content": "say hi"}},
		}, &res)
		if len(res.Choices) != 1 || res.Choices[0].FinishReason != "stop" {
			t.Fatalf("answer %d: %+v, want one choice that stops by itself", i, res)
		}
		lengths[res.Usage.CompletionTokens] = true
	}
	if len(lengths) < 2 {
		t.Fatalf("8 sampled answers all of length %v: the end is not drawn at random", lengths)
	}
}

func TestClaudeCodeAgainstDaemon(t *testing.T) {
	bin := agentBin(t, "claude")
	base, logs := agentDaemon(t, agentDaemonArgs...)
	rec := newRecorder(t, base)
	ag, _ := findAgent("claude")
	_, env, _ := agentHome(t, ag, launchTarget{Base: rec.URL, Model: agentModel.id, Context: testenv.AgentContext})
	work := t.TempDir()

	mark := logs.Len()
	turn1 := runAgent(t, work, env, bin, "-p", "say hi", "--model", agentModel.id)
	if strings.TrimSpace(turn1.Stdout) == "" {
		t.Fatalf("turn 1 printed no answer\nstderr:\n%s", turn1.Stderr)
	}
	lines := agentAccessLines(t, logs, mark)
	checkStatuses(t, "claude turn 1", lines)
	first := largest(t, lines, "/v1/messages")
	t.Logf("claude turn 1: %s, %d prompt tokens (%d cached)", turn1.Took.Round(100e6), first.Prompt, first.Cached)

	mark = logs.Len()
	turn2 := runAgent(t, work, env, bin, "-p", "--continue", "say more", "--model", agentModel.id)
	if strings.TrimSpace(turn2.Stdout) == "" {
		t.Fatalf("turn 2 printed no answer\nstderr:\n%s", turn2.Stderr)
	}
	lines = agentAccessLines(t, logs, mark)
	checkStatuses(t, "claude turn 2", lines)
	second := checkTurn2Cache(t, "claude", lines, "/v1/messages")
	t.Logf("claude turn 2: %s, %d of %d prompt tokens cached", turn2.Took.Round(100e6), second.Cached, second.Prompt)
	if second.Prompt <= first.Prompt {
		t.Errorf("turn 2's prompt (%d tokens) is not longer than turn 1's (%d): --continue lost the conversation", second.Prompt, first.Prompt)
	}
	checkShapes(t, "claude-code", rec.since(0))
}

func TestOpencodeAgainstDaemon(t *testing.T) {
	bin := agentBin(t, "opencode")
	base, logs := agentDaemon(t, agentDaemonArgs...)
	rec := newRecorder(t, base)
	ag, _ := findAgent("opencode")
	_, env, _ := agentHome(t, ag, launchTarget{Base: rec.URL, Model: agentModel.id, Context: testenv.AgentContext})
	work := t.TempDir()

	mark := logs.Len()
	turn1 := runAgent(t, work, env, bin, "run", "say hi")
	if strings.TrimSpace(turn1.Stdout) == "" {
		t.Fatalf("turn 1 printed no answer\nstderr:\n%s", turn1.Stderr)
	}
	lines := agentAccessLines(t, logs, mark)
	checkStatuses(t, "opencode turn 1", lines)
	first := largest(t, lines, "/v1/chat/completions")
	t.Logf("opencode turn 1: %s, %d prompt tokens (%d cached)", turn1.Took.Round(100e6), first.Prompt, first.Cached)

	mark = logs.Len()
	turn2 := runAgent(t, work, env, bin, "run", "--continue", "say more")
	if strings.TrimSpace(turn2.Stdout) == "" {
		t.Fatalf("turn 2 printed no answer\nstderr:\n%s", turn2.Stderr)
	}
	lines = agentAccessLines(t, logs, mark)
	checkStatuses(t, "opencode turn 2", lines)
	second := checkTurn2Cache(t, "opencode", lines, "/v1/chat/completions")
	t.Logf("opencode turn 2: %s, %d of %d prompt tokens cached", turn2.Took.Round(100e6), second.Cached, second.Prompt)
	if second.Prompt <= first.Prompt {
		t.Errorf("turn 2's prompt (%d tokens) is not longer than turn 1's (%d): --continue lost the conversation", second.Prompt, first.Prompt)
	}
	checkShapes(t, "opencode", rec.since(0))
}

func TestCodexAgainstDaemon(t *testing.T) {
	bin := agentBin(t, "codex")
	base, logs := agentDaemonWith(t, map[string]string{patchModel: patchModelFile(t)}, agentDaemonArgs...)
	rec := newRecorder(t, base)
	ag, _ := findAgent("codex")
	_, env, s := agentHome(t, ag, launchTarget{Base: rec.URL, Model: agentModel.id, Context: testenv.AgentContext})
	work := t.TempDir()
	codex := func(args ...string) agentRun {
		t.Helper()
		return runAgent(t, work, env, bin, append(append(append([]string(nil), s.Args...), "exec", "--skip-git-repo-check"), args...)...)
	}

	mark := logs.Len()
	turn1 := codex("say hi")
	if strings.TrimSpace(turn1.Stdout) == "" {
		t.Fatalf("turn 1 printed no answer\nstderr:\n%s", turn1.Stderr)
	}
	lines := agentAccessLines(t, logs, mark)
	checkStatuses(t, "codex turn 1", lines)
	first := largest(t, lines, "/v1/responses")
	t.Logf("codex turn 1: %s, %d prompt tokens (%d cached)", turn1.Took.Round(100e6), first.Prompt, first.Cached)

	mark = logs.Len()
	turn2 := codex("resume", "--last", "say more")
	if strings.TrimSpace(turn2.Stdout) == "" {
		t.Fatalf("turn 2 printed no answer\nstderr:\n%s", turn2.Stderr)
	}
	lines = agentAccessLines(t, logs, mark)
	checkStatuses(t, "codex turn 2", lines)
	second := checkTurn2Cache(t, "codex", lines, "/v1/responses")
	t.Logf("codex turn 2: %s, %d of %d prompt tokens cached", turn2.Took.Round(100e6), second.Cached, second.Prompt)
	if second.Prompt <= first.Prompt {
		t.Errorf("turn 2's prompt (%d tokens) is not longer than turn 1's (%d): resume lost the conversation", second.Prompt, first.Prompt)
	}
	// A catalog id of Codex's own, which the daemon's alias maps to the
	// local model.
	mark = logs.Len()
	other := codex("-m", "gpt-5.5", "say hi")
	if strings.TrimSpace(other.Stdout) == "" {
		t.Fatalf("gpt-5.5 printed no answer\nstderr:\n%s", other.Stderr)
	}
	checkStatuses(t, "codex -m gpt-5.5", agentAccessLines(t, logs, mark))
	t.Logf("codex -m gpt-5.5: %s", other.Took.Round(100e6))

	checkShapes(t, "codex", rec.since(0))
	checkApplyPatch(t, base, rec.since(0))
}

// patchModel is the model the apply_patch check samples from: Qwen2.5's
// real template over the generator's small byte-level vocabulary (sampling
// under a grammar costs a check of every token of the vocabulary at every
// step: Qwen2.5's 152k make a patch take many minutes on 2 cores), with
// the escape of a new line, "*", the space and "E" raised, so that random
// weights under apply_patch's grammar end lines, open a "***" line after
// each and make it "*** End Patch" within a few lines (the space alone,
// since the vocabulary's " A" would otherwise always make it "*** Add").
const patchModel = "t/patch"

func patchModelFile(t *testing.T) string {
	t.Helper()
	tmpl, err := os.ReadFile(testenv.LlamaTemplate(t, agentModel.template))
	if err != nil {
		t.Fatal(err)
	}
	o := ggufgen.Options{Vocab: ggufgen.BPE, VocabSize: 2048, Type: ggufgen.F16, Context: testenv.AgentContext,
		Template: string(tmpl), EndsTurns: true, LineAfter: 4}
	path := filepath.Join(t.TempDir(), "patch.gguf")
	if err := ggufgen.WriteFile(path, o); err != nil {
		t.Fatal(err)
	}
	v, err := ggufgen.ReadVocab(path)
	if err != nil {
		t.Fatal(err)
	}
	// The call's input is a JSON string in the tool call: its new lines
	// are the escape \n, a backslash and an n, and n must win over the
	// other escapes and the letters that may follow one.
	o.Raise = map[int]float32{}
	for tok, lift := range map[string]float32{"*": 8, "\\": 8, "n": 10, "E": 20, "Ġ": 10} {
		id := v.ID(tok)
		if id < 0 {
			t.Fatalf("the generated vocabulary has no %q token", tok)
		}
		o.Raise[id] = lift
	}
	if err := ggufgen.WriteFile(path, o); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkApplyPatch sends the daemon a request shaped as Codex's (the last one
// it sent that offers apply_patch as a custom tool with a Lark grammar) to
// the patch model, forcing that tool the way the Responses API names a
// custom tool, and parses the call's input under the Lark grammar Codex
// sent.
func checkApplyPatch(t *testing.T, base string, reqs []recorded) {
	t.Helper()
	var body map[string]any
	var definition string
	for _, r := range reqs {
		tools, _ := r.Body["tools"].([]any)
		for _, x := range tools {
			tool, _ := x.(map[string]any)
			format, _ := tool["format"].(map[string]any)
			if tool["type"] == "custom" && tool["name"] == "apply_patch" && format["syntax"] == "lark" {
				body, definition = r.Body, format["definition"].(string)
			}
		}
	}
	if body == nil {
		t.Fatal("Codex offered no custom apply_patch tool with a Lark grammar")
	}
	g, err := lark.Parse(definition)
	if err != nil {
		t.Fatalf("Codex's apply_patch grammar does not parse: %v\n%s", err, definition)
	}
	req := map[string]any{}
	for k, v := range body {
		req[k] = v
	}
	req["stream"] = false
	req["model"] = patchModel
	req["tool_choice"] = map[string]any{"type": "custom", "name": "apply_patch"}
	req["max_output_tokens"] = 6000
	var res struct {
		Status string `json:"status"`
		Output []struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Input string `json:"input"`
		} `json:"output"`
	}
	postJSONTo(t, base+"/v1/responses", req, &res)
	for _, item := range res.Output {
		if item.Type == "custom_tool_call" && item.Name == "apply_patch" {
			if !g.Match(item.Input) {
				t.Fatalf("the forced apply_patch call (response %s) does not parse under Codex's Lark grammar:\n%s\ngrammar:\n%s", res.Status, item.Input, definition)
			}
			t.Logf("apply_patch call of %d bytes parses under Codex's grammar", len(item.Input))
			return
		}
	}
	t.Fatalf("forced apply_patch: no custom_tool_call in %+v", res.Output)
}

// realDaemonWith imports the model file at path as id into a fresh home and
// starts a daemon on it.
func realDaemonWith(t *testing.T, path, id string, args ...string) (home, base string) {
	t.Helper()
	home = t.TempDir()
	if out, err := runCLI(t, map[string]string{"MODELD_HOME": home}, "import", path, "--name", id); err != nil {
		t.Fatalf("import %s: %v\n%s", id, err, out)
	}
	_, base, logs := startDaemon(t, home, args...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	})
	return home, base
}

// postJSONTo posts in as JSON to url and decodes a 200 answer into out.
func postJSONTo(t *testing.T, url string, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: agentCLITimeout}
	res, err := client.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", url, res.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("POST %s: %v in %s", url, err, body)
	}
}
