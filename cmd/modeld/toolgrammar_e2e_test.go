package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/modeld/modeld/internal/testenv"
)

// TestToolChoiceRequiredAgainstDaemon: through the daemon and the runner,
// on a random-weight model with Qwen2.5's real vocabulary and template,
// tool_choice required gives calls only (finish tool_calls) of the tool,
// with arguments its schema accepts: with random weights only the grammar
// makes them valid. The same request streamed reassembles (the SDK's
// accumulator) to the same calls; parallel_tool_calls false gives one; a
// parameters schema the grammar cannot enforce is a 400 naming the tool.
func TestToolChoiceRequiredAgainstDaemon(t *testing.T) {
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
	schema := `{"type":"object","properties":{"city":{"type":"string","maxLength":8},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}`
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://w.json", doc); err != nil {
		t.Fatal(err)
	}
	v, err := c.Compile("mem://w.json")
	if err != nil {
		t.Fatal(err)
	}
	params := openai.ChatCompletionNewParams{
		Model:    "t/qwen",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object",
				"properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 8}, "unit": map[string]any{"enum": []string{"c", "f"}}},
				"required":   []string{"city", "unit"}, "additionalProperties": false}})},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
		MaxTokens:  openai.Int(600), Temperature: openai.Float(1), Seed: openai.Int(3),
	}
	client := sdk(base)
	// The first request evaluates the prompt afresh, the later ones reuse its
	// KV from the slot: logits computed in another batch shape may differ in
	// the last bits, which can turn a sampled token of random weights. So the
	// streamed and non-streamed answers compared are both made on the reused
	// prefix, after one request that warms the slot.
	if _, err := client.Chat.Completions.New(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	for _, single := range []bool{false, true} {
		if single {
			params.ParallelToolCalls = openai.Bool(false)
		}
		resp, err := client.Chat.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		ch := resp.Choices[0]
		// With parallel calls the grammar allows one call after another; on some
		// CPU variants the random weights write them until max_tokens, and the
		// last one is cut (finish length): the calls before it must be valid.
		complete := ch.Message.ToolCalls
		cut := !single && ch.FinishReason == "length" && len(complete) > 0
		if cut {
			complete = complete[:len(complete)-1]
		}
		if (ch.FinishReason != "tool_calls" && !cut) || len(ch.Message.ToolCalls) == 0 || (single && len(ch.Message.ToolCalls) != 1) {
			t.Fatalf("single %v: finish %q, calls %+v, content %q", single, ch.FinishReason, ch.Message.ToolCalls, ch.Message.Content)
		}
		for _, call := range complete {
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(call.Function.Arguments))
			if err != nil || call.Function.Name != "get_weather" {
				t.Fatalf("call %+v: %v", call, err)
			}
			if err := v.Validate(inst); err != nil {
				t.Fatalf("arguments %q fail the schema: %v", call.Function.Arguments, err)
			}
		}
		stream := client.Chat.Completions.NewStreaming(context.Background(), params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		got := acc.Choices[0].Message.ToolCalls
		if len(got) != len(ch.Message.ToolCalls) {
			t.Fatalf("streamed %d calls, non-streamed %d", len(got), len(ch.Message.ToolCalls))
		}
		for i := range got {
			if got[i].Function.Name != ch.Message.ToolCalls[i].Function.Name || got[i].Function.Arguments != ch.Message.ToolCalls[i].Function.Arguments {
				t.Fatalf("streamed call %+v, non-streamed %+v", got[i], ch.Message.ToolCalls[i])
			}
		}
	}
	params.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name: "scan", Parameters: openai.FunctionParameters{"type": "object", "patternProperties": map[string]any{"^x": map[string]any{}}}})}
	_, err = client.Chat.Completions.New(context.Background(), params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, `"scan"`) || !strings.Contains(apiErr.Message, "patternProperties") {
		t.Fatalf("unenforceable schema: %v", err)
	}
}

// TestToolChoiceFamiliesAgainstDaemon: through the daemon and the runner,
// random-weight models with the real templates of other call families
// (Llama 3.1's JSON, Mistral Small 3.2's [TOOL_CALLS]name[ARGS], DeepSeek
// R1's distill, whose prompt opens a thinking block) answer tool_choice
// required and a named function with calls of the tool whose arguments its
// schema accepts, the streamed calls equal to the non-streamed ones; the
// R1 distill's reasoning comes back apart from the calls. tool_choice auto
// answers without error, with calls only when finish is tool_calls.
func TestToolChoiceFamiliesAgainstDaemon(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home}
	models := []struct{ name, vocab, template string }{
		{"t/llama31", "llama-bpe", "meta-llama-Llama-3.1-8B-Instruct"},
		{"t/mistral32", "llama-spm", "Mistral-Small-3.2-24B-Instruct-2506"},
		{"t/r1", "qwen2", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"},
	}
	for _, m := range models {
		if out, err := runCLI(t, env, "import", testenv.LlamaChatModel(t, m.vocab, m.template), "--name", m.name); err != nil {
			t.Fatalf("import %s: %v\n%s", m.name, err, out)
		}
	}
	_, base, logs := startDaemon(t, home, "--context-size", "2048")
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	}()
	schema := `{"type":"object","properties":{"a":{"type":"integer","minimum":0,"maximum":99},"b":{"type":"integer","minimum":0,"maximum":99}},"required":["a","b"],"additionalProperties":false}`
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://add.json", doc); err != nil {
		t.Fatal(err)
	}
	v, err := c.Compile("mem://add.json")
	if err != nil {
		t.Fatal(err)
	}
	tools := []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "add", Parameters: openai.FunctionParameters{"type": "object",
			"properties": map[string]any{"a": map[string]any{"type": "integer", "minimum": 0, "maximum": 99}, "b": map[string]any{"type": "integer", "minimum": 0, "maximum": 99}},
			"required":   []string{"a", "b"}, "additionalProperties": false}}),
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "noop", Parameters: openai.FunctionParameters{"type": "object",
			"properties": map[string]any{}, "additionalProperties": false}}),
	}
	client := sdk(base)
	for _, m := range models {
		for _, choice := range []openai.ChatCompletionToolChoiceOptionUnionParam{
			{OfAuto: openai.String("required")},
			openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "add"}),
		} {
			params := openai.ChatCompletionNewParams{
				Model:    m.name,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2+3?")},
				Tools:    tools, ToolChoice: choice, ParallelToolCalls: openai.Bool(false),
				MaxTokens: openai.Int(1), Temperature: openai.Float(1), Seed: openai.Int(5),
			}
			// As in TestToolChoiceRequiredAgainstDaemon: a one-token request
			// evaluates the prompt afresh, so that the streamed and non-streamed
			// answers compared are both made on the slot's reused prefix (logits
			// of another batch shape differ in the last bits on some CPU variants).
			if _, err := client.Chat.Completions.New(context.Background(), params); err != nil {
				t.Fatalf("%s: warming the slot: %v", m.name, err)
			}
			params.MaxTokens = openai.Int(1000)
			resp, err := client.Chat.Completions.New(context.Background(), params)
			if err != nil {
				var apiErr *openai.Error
				if errors.As(err, &apiErr) {
					t.Fatalf("%s: %v: %s", m.name, err, apiErr.RawJSON())
				}
				t.Fatalf("%s: %v", m.name, err)
			}
			ch := resp.Choices[0]
			if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || strings.TrimSpace(ch.Message.Content) != "" {
				t.Fatalf("%s: finish %q, calls %+v, content %q", m.name, ch.FinishReason, ch.Message.ToolCalls, ch.Message.Content)
			}
			call := ch.Message.ToolCalls[0]
			switch call.Function.Name {
			case "add":
				inst, err := jsonschema.UnmarshalJSON(strings.NewReader(call.Function.Arguments))
				if err != nil {
					t.Fatalf("%s: arguments %q: %v", m.name, call.Function.Arguments, err)
				}
				if err := v.Validate(inst); err != nil {
					t.Fatalf("%s: arguments %q fail the schema: %v", m.name, call.Function.Arguments, err)
				}
			case "noop":
				if choice.OfFunctionToolChoice != nil || strings.Trim(strings.TrimSpace(call.Function.Arguments), "{} \n\t") != "" {
					t.Fatalf("%s: call %+v", m.name, call)
				}
			default:
				t.Fatalf("%s: call of %q", m.name, call.Function.Name)
			}
			if m.name == "t/r1" && !strings.Contains(ch.Message.RawJSON(), `"reasoning_content"`) {
				t.Fatalf("%s: no reasoning_content beside the calls: %s", m.name, ch.Message.RawJSON())
			}
			stream := client.Chat.Completions.NewStreaming(context.Background(), params)
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("%s: stream: %v", m.name, err)
			}
			got := acc.Choices[0].Message.ToolCalls
			if len(got) != 1 || got[0].Function.Name != call.Function.Name || got[0].Function.Arguments != call.Function.Arguments {
				t.Fatalf("%s: streamed %+v, non-streamed %+v", m.name, got, call)
			}
		}
		resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: m.name, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2+3?")},
			Tools: tools, MaxTokens: openai.Int(60), Temperature: openai.Float(1), Seed: openai.Int(5),
		})
		if err != nil {
			t.Fatalf("%s auto: %v", m.name, err)
		}
		if ch := resp.Choices[0]; (len(ch.Message.ToolCalls) > 0) != (ch.FinishReason == "tool_calls") {
			t.Fatalf("%s auto: finish %q with %d calls", m.name, ch.FinishReason, len(ch.Message.ToolCalls))
		}
	}
}
