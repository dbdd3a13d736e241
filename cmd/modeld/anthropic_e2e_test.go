package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestAnthropicSDKAgainstDaemon: the official @anthropic-ai/sdk
// (clients/anthropic.mjs) against a daemon and its runner, on a
// random-weight model with Qwen2.5's real vocabulary and template:
// messages.create and messages.stream give the same greedy text and usage
// (the SDK assembles the stream's final message from Anthropic's event
// sequence); tool_choice tool gives one tool_use block whose input the
// input_schema accepts (only the grammar makes random weights write it),
// the same streamed (input_json_delta pieces joined by the SDK); a stop
// sequence the grammar makes it write ends the turn with stop_reason
// stop_sequence naming it (found from the real tokens); the tool_result
// goes back in the next turn; count_tokens of that turn is
// the prompt its generation saw; an unknown model is the SDK's
// NotFoundError with Anthropic's not_found_error body. The chat API gives
// the same greedy text and counts for the same conversation. On a model
// whose template opens the thinking block (DeepSeek R1's distill), the
// reasoning is a thinking block with a signature, created and streamed
// (thinking_delta, signature_delta) alike. A request shaped as Claude Code
// sends it (?beta=true, max_tokens 32000 over a smaller context, fields
// modeld does not read) is answered; so is Claude Code's shape (beta
// messages, a system message in messages, its attribution line), and a new
// session of it reads its prompt from the cache.
func TestAnthropicSDKAgainstDaemon(t *testing.T) {
	_, base := realDaemon(t, []realModel{qwenModel, r1Model}, "--context-size", "2048")
	type usage struct {
		InputTokens          int `json:"input_tokens"`
		OutputTokens         int `json:"output_tokens"`
		CacheReadInputTokens int `json:"cache_read_input_tokens"`
	}
	type reply struct {
		Text       string   `json:"text"`
		Deltas     string   `json:"deltas"`
		StopReason string   `json:"stop_reason"`
		Usage      usage    `json:"usage"`
		Events     []string `json:"events"`
	}
	var got struct {
		Create, Stream reply
		Tool           struct {
			StopReason         string          `json:"stop_reason"`
			Name               string          `json:"name"`
			Input              json.RawMessage `json:"input"`
			StreamedStopReason string          `json:"streamed_stop_reason"`
			StreamedInput      json.RawMessage `json:"streamed_input"`
		}
		Stop struct {
			StopReason           string `json:"stop_reason"`
			StopSequence         string `json:"stop_sequence"`
			StreamedStopReason   string `json:"streamed_stop_reason"`
			StreamedStopSequence string `json:"streamed_stop_sequence"`
		}
		Result struct {
			StopReason string `json:"stop_reason"`
			Usage      usage  `json:"usage"`
		}
		Count struct {
			InputTokens int `json:"input_tokens"`
		}
		NotFound struct {
			Thrown        bool   `json:"thrown"`
			NotFoundError bool   `json:"not_found_error"`
			Status        int    `json:"status"`
			Type          string `json:"type"`
			Message       string `json:"message"`
		} `json:"not_found"`
		ClaudeCode struct {
			First, Second usage
		} `json:"claude_code"`
		Thinking struct {
			Create, Stream *struct {
				Thinking  string `json:"thinking"`
				Signature string `json:"signature"`
			}
			Signatures []string `json:"signatures"`
			StopReason string   `json:"stop_reason"`
		}
	}
	out := runClient(t, base, "anthropic.mjs", map[string]string{"MODEL": "t/qwen", "THINK_MODEL": "t/r1"})
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}

	c, s := got.Create, got.Stream
	if c.Text != s.Text || s.Deltas != s.Text || c.StopReason != s.StopReason || c.Usage.OutputTokens != s.Usage.OutputTokens ||
		c.Usage.InputTokens+c.Usage.CacheReadInputTokens != s.Usage.InputTokens+s.Usage.CacheReadInputTokens {
		t.Errorf("create %+v, stream %+v: want the same text, stop reason and usage", c, s)
	}
	if c.StopReason != "max_tokens" && c.StopReason != "end_turn" || c.Usage.OutputTokens < 1 || c.Usage.OutputTokens > 8 || c.Usage.InputTokens < 1 {
		t.Errorf("create %+v", c)
	}
	// The same conversation through the chat API: the same greedy text and
	// the same counts.
	var cc struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	post(t, base, "/v1/chat/completions", map[string]any{"model": "t/qwen", "max_tokens": 8, "temperature": 0,
		"messages": []map[string]any{{"role": "user", "content": "Hello, Claude"}}}, 200, &cc)
	if cc.Choices[0].Message.Content != c.Text || cc.Usage.PromptTokens != c.Usage.InputTokens+c.Usage.CacheReadInputTokens ||
		cc.Usage.CompletionTokens != c.Usage.OutputTokens {
		t.Errorf("chat API: %q, usage %+v; Messages API: %q, usage %+v", cc.Choices[0].Message.Content, cc.Usage, c.Text, c.Usage)
	}
	for _, ev := range []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"} {
		if !strings.Contains(strings.Join(s.Events, " "), ev) {
			t.Errorf("the stream had no %s: %v", ev, s.Events)
		}
	}

	schema := `{"type":"object","properties":{"city":{"type":"string","maxLength":8},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}`
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	comp := jsonschema.NewCompiler()
	if err := comp.AddResource("mem://w.json", doc); err != nil {
		t.Fatal(err)
	}
	v, err := comp.Compile("mem://w.json")
	if err != nil {
		t.Fatal(err)
	}
	tool := got.Tool
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(tool.Input)))
	if err != nil || tool.Name != "get_weather" || tool.StopReason != "tool_use" {
		t.Fatalf("tool call %+v: %v", tool, err)
	}
	if err := v.Validate(inst); err != nil {
		t.Errorf("input %s fails the input_schema: %v", tool.Input, err)
	}
	if tool.StreamedStopReason != "tool_use" || compactJSON(t, tool.StreamedInput) != compactJSON(t, tool.Input) {
		t.Errorf("streamed: stop %q, input %s; not streamed: input %s", tool.StreamedStopReason, tool.StreamedInput, tool.Input)
	}

	if st := got.Stop; st.StopReason != "stop_sequence" || st.StopSequence != "get_weather" || st.StreamedStopReason != st.StopReason ||
		st.StreamedStopSequence != st.StopSequence {
		t.Errorf("stop sequence: %+v", st)
	}

	r := got.Result
	switch r.StopReason {
	case "end_turn", "max_tokens", "tool_use":
	default:
		t.Errorf("follow-up stop_reason %q", r.StopReason)
	}
	if prompt := r.Usage.InputTokens + r.Usage.CacheReadInputTokens; got.Count.InputTokens != prompt || prompt <= c.Usage.InputTokens {
		t.Errorf("count_tokens %d; the follow-up's prompt %d (usage %+v), longer than the greeting's %d", got.Count.InputTokens, prompt, r.Usage, c.Usage.InputTokens)
	}

	// Claude Code's shape through the SDK: a new session (another
	// attribution line) has the same prompt and reads it from the cache
	// but for the tokens evaluated for the logits.
	code := got.ClaudeCode
	if p1, p2 := code.First.InputTokens+code.First.CacheReadInputTokens, code.Second.InputTokens+code.Second.CacheReadInputTokens; p1 != p2 || p1 < 10 ||
		code.Second.CacheReadInputTokens < p2-2 {
		t.Errorf("Claude Code's shape: session 1 usage %+v, session 2 %+v: want the same prompt, all but 2 tokens of it cached", code.First, code.Second)
	}

	th := got.Thinking
	if th.Create == nil || th.Stream == nil || th.Create.Thinking == "" || th.Create.Signature == "" || th.StopReason != "max_tokens" ||
		*th.Create != *th.Stream || len(th.Signatures) != 1 || th.Signatures[0] != th.Create.Signature {
		t.Errorf("thinking: %+v (create %+v, stream %+v)", th, th.Create, th.Stream)
	}

	// Shaped as Claude Code sends it: ?beta=true, max_tokens 32000 over a
	// context of 2048 (a ceiling, not a refusal), and fields modeld does
	// not read.
	var agent struct {
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type  string          `json:"type"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
	}
	post(t, base, "/v1/messages?beta=true", map[string]any{"model": "t/qwen", "max_tokens": 32000, "stream": false,
		"system":      []map[string]any{{"type": "text", "text": "You are an agent.", "cache_control": map[string]any{"type": "ephemeral"}}},
		"messages":    []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": "Weather in Paris?", "cache_control": map[string]any{"type": "ephemeral"}}}}},
		"tools":       []map[string]any{{"name": "get_weather", "input_schema": json.RawMessage(schema)}},
		"tool_choice": map[string]any{"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true},
		"metadata":    map[string]any{"user_id": "u"}, "thinking": map[string]any{"type": "enabled", "budget_tokens": 31999},
		"context_management": map[string]any{"edits": []map[string]any{{"type": "clear_thinking_20251015", "keep": "all"}}},
		"output_config":      map[string]any{"effort": "high"}}, 200, &agent)
	if agent.StopReason != "tool_use" || len(agent.Content) != 1 || agent.Content[0].Type != "tool_use" {
		t.Errorf("agent-shaped request: %+v", agent)
	} else if inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(agent.Content[0].Input))); err != nil || v.Validate(inst) != nil {
		t.Errorf("agent-shaped request: input %s", agent.Content[0].Input)
	}

	nf := got.NotFound
	if !nf.Thrown || !nf.NotFoundError || nf.Status != 404 || nf.Type != "not_found_error" || !strings.Contains(nf.Message, "no/such-model") {
		t.Errorf("unknown model: %+v", nf)
	}
}

func compactJSON(t *testing.T, b json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}
