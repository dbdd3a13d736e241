package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// runnerChildren counts the processes whose parent is parent and whose
// command line holds "runner", now (no waiting: a model the daemon loads
// for a request is loaded before the request is answered).
func runnerChildren(t *testing.T, parent int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmdline), "runner") {
			n++
		}
	}
	return n
}

// TestStructuredOutputAgainstDaemon drives a real daemon with the official
// SDK: a schema with a keyword the grammar cannot enforce is a 400 on
// response_format naming it, and no model is loaded for it; json_schema
// completions of the random-weight model (greedy and seeded, streamed too)
// are JSON that validates against the schema; json_object gives an object.
func TestStructuredOutputAgainstDaemon(t *testing.T) {
	daemon, base, logs := startDaemon(t, chatHome(t), "--context-size", "1024")
	client := sdk(base)
	ctx := context.Background()

	params := func(rf openai.ChatCompletionNewParamsResponseFormatUnion) openai.ChatCompletionNewParams {
		p := chatParams("t/chat", 300)
		p.ResponseFormat = rf
		return p
	}
	schemaFormat := func(schema map[string]any) openai.ChatCompletionNewParamsResponseFormatUnion {
		return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "answer", Schema: schema, Strict: openai.Bool(true)},
		}}
	}

	// Refused before anything loads.
	_, err := client.Chat.Completions.New(ctx, params(schemaFormat(map[string]any{
		"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}},
		"not": map[string]any{"required": []string{"a"}},
	})))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "response_format" || !strings.Contains(apiErr.Message, `"not"`) {
		t.Fatalf("unsupported schema: %v\n%s", err, logs)
	}
	if n := runnerChildren(t, daemon.Process.Pid); n != 0 {
		t.Fatalf("%d runner(s) started for a refused schema", n)
	}

	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"ok":    map[string]any{"type": "boolean"},
			"n":     map[string]any{"type": "integer", "minimum": 0, "maximum": 99},
			"color": map[string]any{"enum": []string{"red", "green", "blue"}},
			"tags":  map[string]any{"type": "array", "items": map[string]any{"enum": []string{"x", "y"}}, "maxItems": 3},
		},
		"required":             []string{"ok", "n", "color", "tags"},
		"additionalProperties": false,
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://answer.json", doc); err != nil {
		t.Fatal(err)
	}
	v, err := c.Compile("mem://answer.json")
	if err != nil {
		t.Fatal(err)
	}
	check := func(what, content string, finish string) {
		t.Helper()
		if finish != "stop" {
			t.Fatalf("%s: finish %q, want stop: %q", what, finish, content)
		}
		t.Logf("%s: %q", what, content)
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(content))
		if err != nil {
			t.Fatalf("%s: content is not JSON: %v: %q", what, err, content)
		}
		if err := v.Validate(inst); err != nil {
			t.Fatalf("%s: content fails the schema: %v: %q", what, err, content)
		}
	}

	for _, seed := range []int64{-1, 1, 2} {
		p := params(schemaFormat(schema))
		if seed >= 0 {
			p.Temperature, p.Seed = openai.Float(1), openai.Int(seed)
		}
		res, err := client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, logs)
		}
		check(fmt.Sprintf("seed %d", seed), res.Choices[0].Message.Content, string(res.Choices[0].FinishReason))
	}

	// Streamed, the deltas join into valid content too.
	stream := client.Chat.Completions.NewStreaming(ctx, params(schemaFormat(schema)))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	check("stream", acc.Choices[0].Message.Content, string(acc.Choices[0].FinishReason))

	// /v1/completions takes response_format too (the SDK has no field for
	// it: it is set on the request body).
	comp, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model:     "t/raw",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("JSON:")},
		MaxTokens: openai.Int(300), Temperature: openai.Float(0),
	}, option.WithJSONSet("response_format", map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "answer", "schema": schema}}))
	if err != nil {
		t.Fatalf("completion: %v", err)
	}
	check("completion", comp.Choices[0].Text, string(comp.Choices[0].FinishReason))

	// json_object: a JSON object (free text from this model is not one).
	obj := params(openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}})
	obj.Temperature, obj.Seed = openai.Float(1), openai.Int(3)
	res, err := client.Chat.Completions.New(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if res.Choices[0].FinishReason == "stop" {
		if err := json.Unmarshal([]byte(res.Choices[0].Message.Content), &m); err != nil {
			t.Fatalf("json_object content is not an object: %v: %q", err, res.Choices[0].Message.Content)
		}
	} else if !strings.HasPrefix(strings.TrimSpace(res.Choices[0].Message.Content), "{") {
		t.Fatalf("json_object content (cut at the limit) does not open an object: %q", res.Choices[0].Message.Content)
	}
}
