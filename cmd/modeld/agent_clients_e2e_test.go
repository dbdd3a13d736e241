package main

import (
	"testing"

	"github.com/modeld/modeld/internal/testenv"
)

// TestAgentClientsAgainstDaemon drives a real daemon with the agent paths of
// the official Node clients, on a random-weight model with Qwen2.5's real
// vocabulary and (Hermes-format) template: only the grammars can make its
// calls and JSON valid, and each script checks them with the zod schema it
// sent. openai: chat.completions.parse with zodResponseFormat, tools with
// tool_choice required and a named function, the streaming helper giving the
// same calls; LangChain: bindTools with a forced tool, a tool-result round
// trip, withStructuredOutput by JSON schema and by function calling; the AI
// SDK: generateText with toolChoice required and a named tool,
// generateObject.
func TestAgentClientsAgainstDaemon(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home}
	if out, err := runCLI(t, env, "import", testenv.LlamaChatModel(t, "qwen2", "Qwen-Qwen2.5-7B-Instruct"), "--name", "t/qwen"); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	_, base, logs := startDaemon(t, home, "--context-size", "2048")
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	}()
	for _, script := range []string{"openai-chat.mjs", "langchain.mjs", "aisdk.mjs"} {
		t.Run(script, func(t *testing.T) {
			out := runClient(t, base, script, map[string]string{"MODEL": "t/qwen"})
			t.Logf("%s: %s", script, out)
		})
	}
}
