package main

import "testing"

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
	_, base := realDaemon(t, []realModel{qwenModel}, "--context-size", "2048")
	for _, script := range []string{"openai-chat.mjs", "langchain.mjs", "aisdk.mjs"} {
		t.Run(script, func(t *testing.T) {
			out := runClient(t, base, script, map[string]string{"MODEL": "t/qwen"})
			t.Logf("%s: %s", script, out)
		})
	}
}
