package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

// Requests shaped as Claude Code 2.1.328 sends them to a model id it does
// not know, against a daemon on a random-weight model with Qwen3's real
// template: its attribution line first in system, 12 tools, its
// environment block as a system message inside messages (cache_control
// on it), thinking absent, metadata, context_management, output_config,
// max_tokens 32000, stream true.

// claudeTools are 12 tools of Claude Code's names and kinds of schema.
func claudeTools() []map[string]any {
	str := map[string]any{"type": "string"}
	tool := func(name, desc string, props map[string]any, required ...string) map[string]any {
		return map[string]any{"name": name, "description": desc,
			"input_schema": map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false,
				"$schema": "http://json-schema.org/draft-07/schema#"}}
	}
	usage := " Use it when the task needs it, and prefer it to running a shell command for the same purpose. Results come back as text; long results are cut, so narrow the request when you can."
	return []map[string]any{
		tool("Task", "Launch a new agent to handle complex, multi-step tasks autonomously."+usage, map[string]any{"description": str, "prompt": str, "subagent_type": str}, "description", "prompt"),
		tool("Bash", "Executes a given bash command in a persistent shell session with optional timeout, ensuring proper handling and security measures."+usage,
			map[string]any{"command": str, "timeout": map[string]any{"type": "number"}, "description": str}, "command"),
		tool("Glob", "Fast file pattern matching tool that works with any codebase size; returns matching file paths sorted by modification time."+usage, map[string]any{"pattern": str, "path": str}, "pattern"),
		tool("Grep", "A powerful search tool built on ripgrep; supports full regex syntax, file type filters and output modes."+usage,
			map[string]any{"pattern": str, "path": str, "glob": str, "output_mode": map[string]any{"type": "string", "enum": []string{"content", "files_with_matches", "count"}}}, "pattern"),
		tool("ExitPlanMode", "Use this tool when you are in plan mode and have finished presenting your plan and are ready to code."+usage, map[string]any{"plan": str}, "plan"),
		tool("Read", "Reads a file from the local filesystem. The file_path parameter must be an absolute path, not a relative path."+usage,
			map[string]any{"file_path": str, "offset": map[string]any{"type": "number"}, "limit": map[string]any{"type": "number"}}, "file_path"),
		tool("Edit", "Performs exact string replacements in files. You must read the file before editing it."+usage,
			map[string]any{"file_path": str, "old_string": str, "new_string": str, "replace_all": map[string]any{"type": "boolean", "default": false}}, "file_path", "old_string", "new_string"),
		tool("Write", "Writes a file to the local filesystem, overwriting the existing file if there is one at the path."+usage, map[string]any{"file_path": str, "content": str}, "file_path", "content"),
		tool("NotebookEdit", "Completely replaces the contents of a specific cell in a Jupyter notebook with new source."+usage,
			map[string]any{"notebook_path": str, "cell_id": str, "new_source": str}, "notebook_path", "new_source"),
		tool("WebFetch", "Fetches content from a specified URL and processes it using an AI model; takes a URL and a prompt as input."+usage, map[string]any{"url": str, "prompt": str}, "url", "prompt"),
		tool("TodoWrite", "Use this tool to create and manage a structured task list for your current coding session."+usage,
			map[string]any{"todos": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{"content": str, "status": map[string]any{"type": "string", "enum": []string{"pending", "in_progress", "completed"}}}, "required": []string{"content", "status"}}}}, "todos"),
		tool("BashOutput", "Retrieves output from a running or completed background bash shell."+usage, map[string]any{"bash_id": str}, "bash_id"),
	}
}

// claudeSystem is a system prompt of Claude Code's shape: the attribution
// line of session hash first, then its instructions (cache_control on the
// last block).
func claudeSystem(hash string) []map[string]any {
	var sb strings.Builder
	for i, rule := range []string{
		"You are an interactive CLI tool that helps users with software engineering tasks.",
		"Use the instructions below and the tools available to you to assist the user.",
		"IMPORTANT: Assist with defensive security tasks only. Refuse to create, modify, or improve code that may be used maliciously.",
		"You should be concise, direct, and to the point. Answer the user's question directly, without elaboration, explanation, or details.",
		"When you run a non-trivial bash command, explain what the command does and why you are running it.",
		"Before you begin work, think about what the code you are editing is supposed to do based on the filenames and directory structure.",
		"When making changes to files, first understand the file's code conventions. Mimic code style, use existing libraries and utilities, and follow existing patterns.",
		"Never assume that a given library is available, even if it is well known. Check that this codebase already uses it.",
		"Do not add comments to the code you write unless the user asks you to, or the code is complex and requires additional context.",
		"When you have completed a task, run the lint and typecheck commands if they were provided to ensure your code is correct.",
	} {
		fmt.Fprintf(&sb, "# Rule %d\n%s\n\n", i+1, rule)
	}
	return []map[string]any{
		{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328." + hash + "; cc_entrypoint=sdk-cli; cch=00000;"},
		{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
		{"type": "text", "text": sb.String(), "cache_control": map[string]any{"type": "ephemeral"}},
	}
}

// claudeRequest is a Claude Code request of session hash over messages.
func claudeRequest(model, hash string, maxTokens int, messages []map[string]any) map[string]any {
	return map[string]any{"model": model, "max_tokens": maxTokens, "stream": true,
		"system": claudeSystem(hash), "messages": messages, "tools": claudeTools(),
		"metadata":           map[string]any{"user_id": "user_0123_account__session_" + hash},
		"context_management": map[string]any{"edits": []map[string]any{{"type": "clear_thinking_20251015", "keep": "all"}}},
		"output_config":      map[string]any{"effort": "high"}}
}

// claudeTurn is the first user turn and the environment block after it.
func claudeTurn(prompt string) []map[string]any {
	env := "# Environment\nWorking directory: /home/user/project\nIs directory a git repo: Yes\nPlatform: linux\nOS Version: Linux 6.1\nToday's date: 2026-12-01"
	return []map[string]any{
		{"role": "user", "content": []map[string]any{{"type": "text", "text": "<system-reminder>As you answer the user's questions, you can use the following context.</system-reminder>"},
			{"type": "text", "text": prompt}}},
		{"role": "system", "content": []map[string]any{{"type": "text", "text": env, "cache_control": map[string]any{"type": "ephemeral"}}}},
	}
}

// claudeAnswer is a streamed Messages answer: its text and final usage.
type claudeAnswer struct {
	text       string
	blocks     []string // the content blocks' types, in order
	stopReason string
	usage      struct {
		InputTokens          int `json:"input_tokens"`
		OutputTokens         int `json:"output_tokens"`
		CacheReadInputTokens int `json:"cache_read_input_tokens"`
	}
}

func (a claudeAnswer) prompt() int { return a.usage.InputTokens + a.usage.CacheReadInputTokens }

// streamClaude posts body to /v1/messages?beta=true and reads the event
// stream to its message_stop.
func streamClaude(t *testing.T, base string, body map[string]any) claudeAnswer {
	t.Helper()
	status, _, b := call(t, base, "/v1/messages?beta=true", body)
	if status != 200 {
		t.Fatalf("POST /v1/messages?beta=true = %d: %s", status, b)
	}
	var a claudeAnswer
	stopped, thinking := false, ""
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Delta struct {
				Type       string `json:"type"`
				Text       string `json:"text"`
				Thinking   string `json:"thinking"`
				StopReason string `json:"stop_reason"`
			} `json:"delta"`
			Usage        json.RawMessage `json:"usage"`
			ContentBlock struct {
				Type string `json:"type"`
			} `json:"content_block"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		switch ev.Type {
		case "content_block_start":
			a.blocks = append(a.blocks, ev.ContentBlock.Type)
		case "content_block_delta":
			thinking += ev.Delta.Thinking
			a.text += ev.Delta.Text
		case "message_delta":
			a.stopReason = ev.Delta.StopReason
			if err := json.Unmarshal(ev.Usage, &a.usage); err != nil {
				t.Fatal(err)
			}
		case "message_stop":
			stopped = true
		case "error":
			t.Fatalf("error event: %s", data)
		}
	}
	if !stopped {
		t.Fatalf("the stream ended without message_stop:\n%s", b)
	}
	if thinking != "" {
		t.Errorf("thinking absent, yet the answer thinks: %q", thinking)
	}
	return a
}

// qwen3Model writes a random-weight model with Qwen's real vocabulary and
// Qwen3's real template, trained on a context of n tokens, and imports it
// into home as id.
func qwen3Model(t *testing.T, home, id string, n int) {
	t.Helper()
	v, err := ggufgen.ReadVocab(testenv.LlamaVocab(t, "qwen2"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(testenv.LlamaTemplate(t, "Qwen-Qwen3-0.6B"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "qwen3.gguf")
	if err := ggufgen.WriteVocabModelFile(path, v, ggufgen.Options{Type: ggufgen.F16, Template: string(tmpl), Context: n}); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, map[string]string{"MODELD_HOME": home}, "import", path, "--name", id); err != nil {
		t.Fatalf("import %s: %v\n%s", id, err, out)
	}
}

// TestClaudeCodeShapedAgainstDaemon: Claude Code's requests complete, and
// reuse the prefix cache as an agent needs. Turn 1 (max_tokens 32000, a
// ceiling over what the context leaves) completes with no thinking, and a
// forced tool call with thinking absent opens no reasoning block. Random
// weights never end a turn, so the turns whose reuse is measured stand in
// for a trained model's short answer with max_tokens 48: turn 2 (the same
// conversation extended with the answer and a new user turn) reads ≥ 95 %
// of its prompt from the cache, and so does a new session, whose
// attribution line differs (dropped, so the prompt does not). On the same
// daemon a short side request between them does not evict the session's
// prefix (four slots). /metrics counts each request's prompt tokens as
// vllm:prefix_cache_queries and its cache_read_input_tokens as hits.
func TestClaudeCodeShapedAgainstDaemon(t *testing.T) {
	home := t.TempDir()
	qwen3Model(t, home, "t/qwen3", 8192)
	_, base, logs := startDaemon(t, home, "--context-size", "4096", "--chat-slots", "4")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	})
	const model = "t/qwen3"
	series := func(name string) string { return name + `{model_name="` + model + `"}` }

	first := claudeTurn("say hi")
	one := streamClaude(t, base, claudeRequest(model, "a3f", 32000, first))
	if one.stopReason != "max_tokens" && one.stopReason != "end_turn" || one.usage.OutputTokens < 1 || one.prompt() < 1500 {
		t.Fatalf("turn 1 (max_tokens 32000): stop %q, usage %+v", one.stopReason, one.usage)
	}
	t.Logf("turn 1: %d prompt tokens, %d generated", one.prompt(), one.usage.OutputTokens)

	// thinking absent: a tool call forced by tool_choice starts at once,
	// with no reasoning block before it (Qwen3's template closes it).
	forced := claudeRequest(model, "a3f", 64, first)
	forced["tool_choice"] = map[string]any{"type": "tool", "name": "Read"}
	if a := streamClaude(t, base, forced); len(a.blocks) == 0 || a.blocks[0] != "tool_use" {
		t.Errorf("forced tool call: blocks %v (stop %q), want a tool_use block first", a.blocks, a.stopReason)
	}

	// The session again with an answer of a trained model's length.
	short := streamClaude(t, base, claudeRequest(model, "a3f", 48, first))
	turn2 := append(append([]map[string]any{}, first...),
		map[string]any{"role": "assistant", "content": []map[string]any{{"type": "text", "text": short.text}}},
		map[string]any{"role": "user", "content": []map[string]any{{"type": "text", "text": "and now say bye", "cache_control": map[string]any{"type": "ephemeral"}}}})
	two := streamClaude(t, base, claudeRequest(model, "a3f", 48, turn2))
	if r := float64(two.usage.CacheReadInputTokens) / float64(two.prompt()); r < 0.95 {
		t.Errorf("turn 2 read %d of %d prompt tokens from the cache (%.1f %%), want ≥ 95 %%", two.usage.CacheReadInputTokens, two.prompt(), 100*r)
	}

	// A side request (a title), then a new session: another attribution
	// line, and the same first prompt.
	var side struct {
		Usage struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
	}
	post(t, base, "/v1/messages", map[string]any{"model": model, "max_tokens": 4,
		"messages": []map[string]any{{"role": "user", "content": "Summarise this chat in 3 words: say hi"}}}, 200, &side)
	before, _ := scrape(t, base)
	fresh := streamClaude(t, base, claudeRequest(model, "09c", 48, first))
	after, _ := scrape(t, base)
	if r := float64(fresh.usage.CacheReadInputTokens) / float64(fresh.prompt()); r < 0.95 {
		t.Errorf("a new session read %d of %d prompt tokens from the cache (%.1f %%), want ≥ 95 %%", fresh.usage.CacheReadInputTokens, fresh.prompt(), 100*r)
	}
	if fresh.prompt() != short.prompt() {
		t.Errorf("sessions a3f and 09c: %d and %d prompt tokens, want the same prompt", short.prompt(), fresh.prompt())
	}
	q, h := series("vllm:prefix_cache_queries_total"), series("vllm:prefix_cache_hits_total")
	if d := after[q] - before[q]; d != float64(fresh.prompt()) {
		t.Errorf("%s rose by %v, want the request's %d prompt tokens", q, d, fresh.prompt())
	}
	if d := after[h] - before[h]; d != float64(fresh.usage.CacheReadInputTokens) || d == 0 {
		t.Errorf("%s rose by %v, want the request's %d cached tokens", h, d, fresh.usage.CacheReadInputTokens)
	}
	t.Logf("turn 2: %d of %d cached; new session: %d of %d cached", two.usage.CacheReadInputTokens, two.prompt(),
		fresh.usage.CacheReadInputTokens, fresh.prompt())
}

// TestClaudeCodeKeepBillingHeader: with --keep-billing-header the
// attribution line stays first in the prompt, so a new session of Claude
// Code (another line, the same everything else) reuses almost nothing of
// the last one's cache: the reuse the default's dropping of it gives.
func TestClaudeCodeKeepBillingHeader(t *testing.T) {
	home := t.TempDir()
	qwen3Model(t, home, "t/qwen3", 4096)
	_, base, logs := startDaemon(t, home, "--context-size", "4096", "--keep-billing-header")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	})
	first := claudeTurn("say hi")
	a := streamClaude(t, base, claudeRequest("t/qwen3", "a3f", 8, first))
	b := streamClaude(t, base, claudeRequest("t/qwen3", "09c", 8, first))
	if b.prompt() < a.prompt()-2 || b.prompt() > a.prompt()+2 || b.usage.CacheReadInputTokens*20 > b.prompt() {
		t.Errorf("kept: session a3f %d prompt tokens, a new session %d with %d read from the cache; want about the same length and under 5 %% reused",
			a.prompt(), b.prompt(), b.usage.CacheReadInputTokens)
	}
	t.Logf("kept: a new session read %d of %d prompt tokens from the cache", b.usage.CacheReadInputTokens, b.prompt())
}
