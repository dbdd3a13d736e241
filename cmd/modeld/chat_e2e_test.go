package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/models"
)

// chatHome makes a MODELD_HOME holding the generated test models:
// t/chat (ChatML template), t/raw (no template) and t/broken (a GGUF whose
// tensor data is overwritten with garbage after import).
func chatHome(t *testing.T) string {
	t.Helper()
	home, src := t.TempDir(), t.TempDir()
	env := map[string]string{"MODELD_HOME": home}
	for name, opts := range map[string]ggufgen.Options{
		"chat":   ggufgen.Tiny(ggufgen.SPM),
		"raw":    func() ggufgen.Options { o := ggufgen.Tiny(ggufgen.BPE); o.NoTemplate = true; return o }(),
		"broken": func() ggufgen.Options { o := ggufgen.Tiny(ggufgen.SPM); o.Seed = 99; return o }(),
	} {
		path := filepath.Join(src, name+".gguf")
		if err := ggufgen.WriteFile(path, opts); err != nil {
			t.Fatal(err)
		}
		if out, err := runCLI(t, env, "import", path, "--name", "t/"+name); err != nil {
			t.Fatalf("import %s: %v\n%s", name, err, out)
		}
	}
	// Overwrite the tail (tensor data and then some) of t/broken's blob.
	st, err := models.Open(filepath.Join(home, "models"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Get("t/broken")
	if err != nil {
		t.Fatal(err)
	}
	blob, err := st.FilePath(m, m.GGUF.File)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(blob, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blob, m.Files[0].Size/3); err != nil {
		t.Fatal(err)
	}
	return home
}

func sdk(base string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

func chatParams(model string, maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:       model,
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage("Hello, who are you?")},
		MaxTokens:   openai.Int(maxTokens),
		Temperature: openai.Float(0),
	}
}

// TestOpenAISDKAgainstDaemon drives a real daemon (runner processes, llama.cpp)
// with the official OpenAI Go SDK.
func TestOpenAISDKAgainstDaemon(t *testing.T) {
	daemon, base, logs := startDaemon(t, chatHome(t), "--context-size", "1024")
	client := sdk(base)
	ctx := context.Background()

	full, err := client.Chat.Completions.New(ctx, chatParams("t/chat", 24))
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, logs)
	}
	if len(full.Choices) != 1 || full.Choices[0].Message.Content == "" || full.Choices[0].FinishReason != "length" {
		t.Fatalf("chat = %+v", full.Choices)
	}
	if full.Usage.CompletionTokens != 24 || full.Usage.PromptTokens == 0 || full.Usage.TotalTokens != full.Usage.PromptTokens+24 {
		t.Fatalf("usage = %+v", full.Usage)
	}

	// Streaming gives the same text, and the same usage (with a reused prefix).
	params := chatParams("t/chat", 24)
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	var streamed strings.Builder
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if len(chunk.Choices) > 0 {
			streamed.WriteString(chunk.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if streamed.String() != full.Choices[0].Message.Content {
		t.Fatalf("streamed %q != non-streamed %q", streamed.String(), full.Choices[0].Message.Content)
	}
	if acc.Usage.CompletionTokens != 24 || acc.Usage.PromptTokensDetails.CachedTokens == 0 {
		t.Fatalf("streamed usage = %+v (want 24 completion tokens and a reused prefix)", acc.Usage)
	}

	// Completions on a model without a chat template work; chat on it is a 400.
	comp, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model:     "t/raw",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(8), Temperature: openai.Float(0),
	})
	if err != nil || len(comp.Choices) != 1 || comp.Usage.CompletionTokens == 0 {
		t.Fatalf("completion = %+v, %v", comp, err)
	}
	_, err = client.Chat.Completions.New(ctx, chatParams("t/raw", 4))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "no chat template") {
		t.Fatalf("chat without a template: %v", err)
	}

	// Context overflow is a 400 with the numbers, not a silent truncation.
	_, err = client.Chat.Completions.New(ctx, chatParams("t/chat", 5000))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "context_length_exceeded" || !strings.Contains(apiErr.Message, "1024") {
		t.Fatalf("context overflow: %v", err)
	}

	// A model whose file is garbage is refused by the header scan before any
	// parser or runner reads it: a 422 invalid_model; the daemon stays up.
	_, err = client.Chat.Completions.New(ctx, chatParams("t/broken", 4))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 422 || apiErr.Code != "invalid_model" {
		t.Fatalf("broken model: %v", err)
	}
	if _, err := client.Chat.Completions.New(ctx, chatParams("t/chat", 4)); err != nil {
		t.Fatalf("daemon unusable after a broken model: %v", err)
	}

	// kill -9 of the runner mid-stream: that client gets an error event, the next
	// request loads the model again and succeeds.
	stream = client.Chat.Completions.NewStreaming(ctx, chatParams("t/chat", 900))
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	runner := childPID(t, daemon.Process.Pid, "runner")
	if err := syscall.Kill(runner, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for stream.Next() {
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("stream after the runner was killed: err = %v", err)
	}
	again, err := client.Chat.Completions.New(ctx, chatParams("t/chat", 24))
	if err != nil || again.Choices[0].Message.Content != full.Choices[0].Message.Content {
		t.Fatalf("after a runner crash: %v (%+v)", err, again)
	}

	// Models listing reports the context size in use: the configured cap (1024)
	// below the model's trained context (2048).
	res, err := http.Get(base + "/v1/models/t/chat")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /v1/models/t/chat: %v %v", err, res)
	}
	var mo struct {
		ContextLength  int `json:"context_length"`
		TrainedContext int `json:"trained_context_length"`
	}
	err = json.NewDecoder(res.Body).Decode(&mo)
	res.Body.Close()
	if err != nil || mo.ContextLength != 1024 || mo.TrainedContext != 2048 {
		t.Fatalf("model context = %+v, %v", mo, err)
	}
}

// childPID finds the child process of parent whose command line contains word.
func childPID(t *testing.T, parent int, word string) int {
	t.Helper()
	pid := 0
	poll(t, fmt.Sprintf("a %s child of %d", word, parent), func() bool { pid = findChild(parent, word); return pid != 0 })
	return pid
}

// findChild is the child process of parent whose command line contains word, or 0.
func findChild(parent int, word string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state, ppid, ...
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
		f := strings.Fields(rest)
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmdline), word) {
			return pid
		}
	}
	return 0
}
