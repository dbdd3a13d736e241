package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// ollamaHub serves one GGUF file as org/tiny the way the hub does (revision,
// tree listing with the LFS sha256, resolve), for the daemon's pulls.
func ollamaHub(t *testing.T, data []byte) *httptest.Server {
	t.Helper()
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	commit := strings.Repeat("ef", 20)
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/api/models/org/tiny/revision/main"):
			fmt.Fprintf(w, `{"sha":%q}`, commit)
		case strings.HasSuffix(r.URL.Path, "/api/models/org/tiny/tree/"+commit):
			fmt.Fprintf(w, `[{"type":"file","path":"tiny-Q4_0.gguf","size":%d,"oid":"x","lfs":{"oid":%q,"size":%d,"pointerSize":100}}]`, len(data), sha, len(data))
		case r.URL.Path == "/org/tiny/resolve/"+commit+"/tiny-Q4_0.gguf":
			w.Header().Set("X-Linked-Etag", `"`+sha+`"`)
			http.ServeContent(w, r, "x", time.Time{}, bytes.NewReader(data))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(hub.Close)
	return hub
}

// TestOllamaClientAgainstDaemon runs the official ollama npm client
// (clients/ollama.mjs) against a real daemon and runner, on random-weight
// models with Qwen2.5's real vocabulary and template and with StarCoder's
// vocabulary (fill-in-the-middle tokens), and an ONNX embedding model: chat
// and generate streamed and not, think, format with a schema, a tool call
// and a tool-result round trip, suffix, embed and embeddings, list, show,
// ps, pull with progress from a fake hub, copy, delete, a 404 and an
// unload. Here it checks that the counts are exact (the prompt /v1/tokenize
// counts, the infill prompt StarCoder's markers make) and that the Ollama
// and OpenAI dialects give the same greedy text.
func TestOllamaClientAgainstDaemon(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home}
	importReal(t, home, qwenModel, realModel{"t/coder", "starcoder", "Qwen-Qwen2.5-7B-Instruct"})
	if out, err := runCLI(t, env, "import", fixtureDir("embed-mean"), "--name", "t/embed"); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	_, data := tinyGGUFFile(t)
	hub := ollamaHub(t, data)
	_, base, logs := startDaemon(t, home, "--context-size", "2048", "--hf-endpoint", hub.URL, "--allow-private-pull")
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	}()
	raw := runClient(t, base, "ollama.mjs", map[string]string{"MODEL": "t/qwen", "EMBED_MODEL": "t/embed", "PULL_MODEL": "org/tiny:Q4_0", "CODER_MODEL": "t/coder"})
	var out struct {
		Chat struct {
			Text            string `json:"text"`
			PromptEvalCount int    `json:"prompt_eval_count"`
			EvalCount       int    `json:"eval_count"`
		} `json:"chat"`
		Generate struct {
			Text            string `json:"text"`
			PromptEvalCount int    `json:"prompt_eval_count"`
		} `json:"generate"`
		Infill struct {
			PromptEvalCount int `json:"prompt_eval_count"`
		} `json:"infill"`
		Pull []string `json:"pull"`
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("client output %q: %v", raw, err)
	}
	t.Logf("ollama.mjs: %s", raw)

	hello := []map[string]any{{"role": "user", "content": "Hello"}}
	if n := len(tokenizeIDs(t, base, map[string]any{"model": "t/qwen", "messages": hello})); out.Chat.PromptEvalCount != n {
		t.Errorf("chat prompt_eval_count %d, /v1/tokenize counts %d", out.Chat.PromptEvalCount, n)
	}
	ask := []map[string]any{{"role": "user", "content": "Why is the sky blue?"}}
	if n := len(tokenizeIDs(t, base, map[string]any{"model": "t/qwen", "messages": ask})); out.Generate.PromptEvalCount != n {
		t.Errorf("generate prompt_eval_count %d, /v1/tokenize counts %d", out.Generate.PromptEvalCount, n)
	}
	// suffix became StarCoder's fill-in-the-middle prompt, its markers one token each.
	fim := "<fim_prefix>def add(a, b):\n<fim_suffix>\n    return c<fim_middle>"
	if n := len(tokenizeIDs(t, base, map[string]any{"model": "t/coder", "content": fim, "add_special": true})); out.Infill.PromptEvalCount != n {
		t.Errorf("infill prompt_eval_count %d, /v1/tokenize counts %d for %q", out.Infill.PromptEvalCount, n, fim)
	}
	// The same conversation through the OpenAI dialect, greedy: the same text and counts.
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
	post(t, base, "/v1/chat/completions", map[string]any{"model": "t/qwen", "messages": hello, "temperature": 0, "max_tokens": 8}, 200, &cc)
	if len(cc.Choices) != 1 || cc.Choices[0].Message.Content != out.Chat.Text || cc.Usage.PromptTokens != out.Chat.PromptEvalCount ||
		cc.Usage.CompletionTokens != out.Chat.EvalCount {
		t.Errorf("OpenAI dialect gave %+v, Ollama's %+v", cc, out.Chat)
	}
	if strings.Join(out.Pull, ",") == "" || out.Pull[len(out.Pull)-1] != "success" {
		t.Errorf("pull statuses %v", out.Pull)
	}
}
